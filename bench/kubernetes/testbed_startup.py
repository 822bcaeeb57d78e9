"""Times `drlsched testbed up` (etcd, kube-apiserver, kwok, fake nodes, kube-scheduler) and prints JSON.

Each node count is started and stopped `--repeat` times in a fresh temporary state directory; the figures
are the wall time of the whole `up` and of each step (a process until healthy, node creation, nodes until
Ready).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from drlsched.machine import machine_info
from drlsched.testbed.build import build
from drlsched.testbed.build import build_versions as versions
from drlsched.testbed.controlplane import Options, down, up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    build()
    results = []
    for nodes in args.nodes:
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="drlsched-bench-") as tmp:
                testbed = up(Options(state_dir=Path(tmp) / "state", nodes=nodes, gpu_nodes=nodes // 5))
                down(testbed.state_dir)
            runs.append({"total": testbed.startup_seconds, **testbed.step_seconds})
        results.append(
            {
                "nodes": nodes,
                "gpu_nodes": nodes // 5,
                "startup_seconds_median": statistics.median(r["total"] for r in runs),
                "runs": runs,
            }
        )
    print(
        json.dumps(
            {"benchmark": "testbed_startup", "results": results, **versions(), "machine": machine_info()},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
