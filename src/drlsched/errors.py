"""Errors that reach users as one clear line and a non-zero exit, never as a traceback."""


class UserError(Exception):
    """Bad input from the user (arguments, files, requests): the message says what and where."""

    exit_code = 2
