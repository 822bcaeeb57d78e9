"""Builds the testbed binaries (if needed) and prints, as JSON, the build time and the binaries' sizes.

The time reported is the one recorded by the build that filled the cache, which was cold only if the Go
build cache (~/.cache/go-build) was empty then; `--cold` rebuilds everything now against an empty, temporary
Go build cache (the module download cache is kept) and reports that time instead. `--extra NAME` does the same for
one of the optional extras (metrics-server, kube-controller-manager, karpenter; each its own cache key) instead of
the core binaries; `--metrics-server` is `--extra metrics-server`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from drlsched.machine import machine_info
from drlsched.testbed.build import EXTRAS, build, build_extra, build_record
from drlsched.testbed.build import build_versions as versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", action="store_true", help="rebuild everything with an empty Go build cache")
    parser.add_argument("--metrics-server", action="store_true", help="the optional metrics-server instead")
    parser.add_argument("--extra", choices=sorted(EXTRAS), help="one of the optional extras instead")
    args = parser.parse_args()
    extra = "metrics-server" if args.metrics_server else args.extra

    def run(force: bool = False) -> object:
        return build_extra(extra, force=force) if extra else build(force=force)

    if args.cold:
        with tempfile.TemporaryDirectory(prefix="drlsched-gocache-") as gocache:
            os.environ["GOCACHE"] = gocache
            run(force=True)
    else:
        run()
    record = (build_record((EXTRAS[extra],)) if extra else build_record()) or {}
    sizes = record.get("binary_bytes", {})
    print(
        json.dumps(
            {
                "benchmark": "testbed_build",
                "cold_rebuild_now": args.cold,
                "build_seconds": record.get("build_seconds"),
                "component_seconds": record.get("component_seconds"),
                "built_at": record.get("built_at"),
                "binary_mib": {name: round(size / 2**20, 1) for name, size in sizes.items()},
                "binary_bytes": sizes,
                **versions(),
                "machine": machine_info(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
