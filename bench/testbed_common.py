"""What every testbed benchmark reports next to its figures: the machine and the component versions."""

from __future__ import annotations

import os
import platform
from typing import Any

from drlsched.testbed.build import build_record


def machine_info() -> dict[str, Any]:
    with open("/proc/meminfo") as meminfo:
        total_kib = int(meminfo.readline().split()[1])
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(total_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_avg_1m": os.getloadavg()[0],
    }


def versions() -> dict[str, Any]:
    record = build_record() or {}
    return {"versions": record.get("versions"), "go": record.get("go"), "build_key": record.get("key")}
