"""Machine facts printed with every benchmark, so numbers can be compared honestly."""

from __future__ import annotations

import os
import platform

import numpy as np


def machine_info() -> dict[str, object]:
    mem_kb = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kb / 2**20, 1),
            "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}
