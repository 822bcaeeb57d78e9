"""Machine facts printed with every benchmark (bench/simulator, bench/kubernetes, bench/learning, bench/traces), so
numbers measured on a shared machine can be compared honestly."""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np


def machine_info() -> dict[str, Any]:
    """CPU, cores, memory, load and software versions: what a number measured here depends on."""
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
            "load_avg_1m": os.getloadavg()[0], "kernel": platform.release(),
            "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}

