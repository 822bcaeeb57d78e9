"""Back-off for a controller that cannot reach its apiserver: one warning per failed attempt, waits doubling from
`initial_s` to `max_s` (client-go's reflector backs off 0.8 s → 30 s), reset by the first success; and the
one-line description of a connection error that `--once` exits with."""

from __future__ import annotations

import kubernetes
import urllib3

from drlsched.k8s.client import NotLeading


class Backoff:
    def __init__(self, initial_s: float = 1.0, max_s: float = 30.0, factor: float = 2.0) -> None:
        self.initial_s, self.max_s, self.factor = initial_s, max_s, factor
        self.failures = 0

    def delay(self) -> float:
        """The wait after the failures so far (0 when the last attempt succeeded)."""
        if not self.failures:
            return 0.0
        return min(self.initial_s * self.factor ** (self.failures - 1), self.max_s)

    def failed(self) -> float:
        self.failures += 1
        return self.delay()

    def succeeded(self) -> None:
        self.failures = 0


def describe(err: BaseException) -> str:
    """One line for an API failure: the HTTP status and reason, or the innermost cause of a connection error
    (urllib3's MaxRetryError wraps the refused connection in a paragraph)."""
    if isinstance(err, kubernetes.client.ApiException):
        return f"HTTP {err.status} {err.reason}"
    if isinstance(err, NotLeading):
        return str(err)
    if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None:
        err = err.reason
    text = str(err)
    if isinstance(err, urllib3.exceptions.NewConnectionError):
        text = text.split(": ", 1)[-1]  # drop the connection object's repr
    if isinstance(err, urllib3.exceptions.ProtocolError) and err.args and isinstance(err.args[-1], BaseException):
        text = f"{err.args[0]} {err.args[-1]}"
    line = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {line}" if line else type(err).__name__
