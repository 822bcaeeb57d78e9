"""Output directories the OS refuses are one clear error, the same in every subcommand."""

from pathlib import Path

import pytest

from drlsched.cli import main
from drlsched.cli_args import make_output_dir
from drlsched.errors import UserError


def test_a_file_in_the_way_is_one_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    with pytest.raises(UserError, match=r"cannot create output directory .*taken/out"):
        make_output_dir(blocker / "out")
    assert make_output_dir(tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize("argv", [
    ["evaluate", "--scenario", "batch", "--policies", "k8s-default", "--seeds", "1", "--nodes", "5",
     "--duration", "60"],
    ["evaluate", "--scenario", "tpch", "--job-policies", "fifo,fair", "--seeds", "1", "--duration", "600"],
])
def test_evaluate_refuses_an_unwritable_out_in_one_line(argv: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    assert main([*argv, "--out", str(blocker / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot create output directory" in err[0]
