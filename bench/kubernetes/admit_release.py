"""`drlsched admit` on the testbed at scale: --jobs jobs of --pods-per-job gated pods created at once, then the
controller's passes (fair, pool --executors) until every pod is released, each pod running --run-s on kwok once
the real kube-scheduler binds it. Reports each pass's duration (list + plan + patches; median and max), the
releases per second of the passes that released, the time from the first pass to the last release, and the
most released pods alive at once against the pool (sampled after each pass). Prints JSON; about 2 minutes at
the defaults.
Usage: nice -n 10 python bench/kubernetes/admit_release.py [--jobs 20] [--pods-per-job 50] [--executors 200]
  > bench/results/admit_release.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kubernetes

from drlsched.jobs.policies import make_job_policy
from drlsched.k8s.admission import GATE
from drlsched.k8s.admit_controller import AdmitController
from drlsched.k8s.objects import JOB_LABEL, TERMINAL_PHASES, pod_manifest
from drlsched.machine import machine_info
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--pods-per-job", type=int, default=50)
    parser.add_argument("--executors", type=int, default=200)
    parser.add_argument("--run-s", type=int, default=5)
    parser.add_argument("--period-s", type=float, default=0.5)
    args = parser.parse_args()
    build()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "tb"
        bed = up(Options(state_dir=state, nodes=5, scheduler="default"))
        try:
            api = bed.api_client()
            core = kubernetes.client.CoreV1Api(api)
            core.create_namespace({"metadata": {"name": "bench"}})
            names = [(f"j{j:02d}", f"j{j:02d}-{i:03d}") for j in range(args.jobs) for i in range(args.pods_per_job)]

            def create(item: tuple[str, str]) -> None:
                pod = pod_manifest(item[1], cpu="100m", memory="128Mi", duration=f"{args.run_s}s",
                                   labels={JOB_LABEL: item[0]})
                pod["spec"]["schedulingGates"] = [{"name": GATE}]
                core.create_namespaced_pod("bench", pod)

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(create, names))
            print(f"created {len(names)} gated pods", file=sys.stderr)
            controller = AdmitController(api, make_job_policy("fair"), executors=args.executors, namespace="bench")
            passes: list[tuple[float, int]] = []
            peak = 0
            started = time.monotonic()
            last_release = started
            released = 0
            while released < len(names):
                t0 = time.monotonic()
                result = controller.step()
                passes.append((time.monotonic() - t0, len(result.released)))
                released += len(result.released)
                if result.released:
                    last_release = time.monotonic()
                items = json.loads(core.list_namespaced_pod("bench", _preload_content=False).data)["items"]
                live = sum(1 for p in items if not p["spec"].get("schedulingGates")
                           and p.get("status", {}).get("phase") not in TERMINAL_PHASES)
                peak = max(peak, live)
                time.sleep(max(0.0, args.period_s - (time.monotonic() - t0)))
            releasing = [(d, n) for d, n in passes if n]
            out = {
                "pods": len(names), "jobs": args.jobs, "executors": args.executors, "run_s": args.run_s,
                "passes": len(passes),
                "pass_s_median": round(statistics.median(d for d, _ in passes), 4),
                "pass_s_max": round(max(d for d, _ in passes), 4),
                "releases_per_s_in_releasing_passes": round(sum(n for _, n in releasing) /
                                                            sum(d for d, _ in releasing), 1),
                "first_pass_to_last_release_s": round(last_release - started, 1),
                "peak_released_alive": peak,
                "conflicts": controller.releases.get(outcome="conflict"),
                "machine": machine_info(),
            }
            print(json.dumps(out, indent=2))
            api.close()
        finally:
            down(state)


if __name__ == "__main__":
    main()
