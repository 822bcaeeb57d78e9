"""Every subcommand's --help renders (a stray `%` in a help string makes argparse raise instead)."""

import argparse

import pytest

from drlsched.cli import build_parser


def _subcommands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(name for a in actions for name in a.choices)


@pytest.mark.parametrize("name", _subcommands())
def test_help_of_every_subcommand_renders(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([name, "--help"])
    assert exit_.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_there_are_subcommands() -> None:
    assert {"simulate", "evaluate", "fill", "train", "replay", "reclaim"} <= set(_subcommands())
