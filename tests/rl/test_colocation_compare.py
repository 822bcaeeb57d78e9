"""drlsched.rl.colocation: entries with their own reclaim configuration, on paired seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drlsched.errors import UserError
from drlsched.rl.colocation import compare, entry_spec, main, parse_entry
from drlsched.source import WorkloadSource


def test_entries_parse_with_their_thresholds() -> None:
    e = parse_entry("ppo:runs/a@b/policy.pt@koordinator:cpu=0.9:suppress=0.7")
    assert e.policy == "ppo:runs/a@b/policy.pt" and e.reclaim.model == "koordinator"
    assert e.reclaim.cpu == 0.9 and e.reclaim.suppress == 0.7
    assert parse_entry(entry_spec("fgd", "peak", 0.8)).reclaim.cpu == 0.8
    for bad in ("k8s-default", "k8s-default@nope", "k8s-default@koordinator:cpu=x", "k8s-default@peak:speed=1",
                "k8s-default@koordinator:cpu=2"):
        with pytest.raises(UserError):
            parse_entry(bad)


def test_the_threshold_is_what_differs_between_entries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = WorkloadSource(scenario="colocation", nodes=2, duration=300.0, load=2.0)
    entries = [parse_entry(x) for x in ("k8s-default@none", "k8s-default@koordinator:cpu=0.3",
                                        "k8s-default@koordinator:cpu=1")]
    results, _ = compare(entries, source, [0, 1])
    util = {p: results["policies"][p]["cpu_util"]["mean"] for p in results["meta"]["entries"]}  # type: ignore[index]
    assert util["k8s-default@koordinator:cpu=1"] > util["k8s-default@koordinator:cpu=0.3"]
    ratios = results["ratio_vs_k8s-default@none"]
    assert ratios["k8s-default@koordinator:cpu=1"]["cpu_util"]["n"] == 2  # type: ignore[index]
    assert main(["--entries", "k8s-default@none,k8s-default@koordinator:cpu=1", "--nodes", "2", "--duration", "120",
                 "--seeds", "1", "--jobs", "1", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "results.json").read_text())["meta"]["scenario"] == "colocation"
    assert (tmp_path / "util_vs_sla.png").is_file()
    assert main(["--entries", "k8s-default@bogus", "--out", str(tmp_path)]) == 2


def test_entries_compare_on_a_part_of_real_usage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    usage = Path(__file__).parents[1] / "core" / "fixtures" / "usage" / "machine_usage.csv"
    argv = ["--entries", "k8s-default@koordinator:cpu=1", "--nodes", "2", "--duration", "120", "--seeds", "1",
            "--jobs", "1", "--out", str(tmp_path), "--usage-trace", str(usage)]
    assert main([*argv, "--usage-window", "2m:"]) == 0
    meta = json.loads((tmp_path / "results.json").read_text())["meta"]
    assert meta["usage"] == {"trace": str(usage), "format": None, "series": None, "window_s": [120.0, None]}
    assert main([*argv, "--usage-window", "1d:"]) == 2  # no sample there: one line, before any run
