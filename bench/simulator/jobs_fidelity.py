"""Model fidelity on the tpch profiles (issue 23): each profiled query alone at each profiled core limit, the
model's run time beside the profile's own run; prints JSON (cells, count within 10%) and, with --markdown, the
table for docs/simulator.md.
Usage: python bench/simulator/jobs_fidelity.py [--profiles DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys

from drlsched.jobs.fidelity import TOLERANCE, fidelity_table
from drlsched.jobs.profiles import load_profiles


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default=None)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    cells = fidelity_table(load_profiles(args.profiles))
    within = sum(abs(c.error) <= TOLERANCE for c in cells)
    if args.markdown:
        print(f"{within} of {len(cells)} cells within {TOLERANCE:.0%}.\n")
        print("| query | size (GB) | cores | profile (s) | model (s) | error |")
        print("|---|---|---|---|---|---|")
        for c in cells:
            mark = "" if abs(c.error) <= TOLERANCE else " **miss**"
            print(f"| Q{c.query} | {c.size_gb} | {c.cores} | {c.profile_s:.1f} | {c.model_s:.1f} | "
                  f"{100 * c.error:+.1f}%{mark} |")
        return 0
    print(json.dumps({"within": within, "cells": len(cells), "tolerance": TOLERANCE,
                      "table": [{"query": c.query, "size_gb": c.size_gb, "cores": c.cores, "profile_s": c.profile_s,
                                 "model_s": c.model_s} for c in cells]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
