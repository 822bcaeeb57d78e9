"""Starting one of a testbed's processes and waiting until it is healthy, and a client for its apiserver: what the
control plane and the optional controllers (kube-controller-manager, Karpenter) share."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import kubernetes

from drlsched.testbed import processes

if TYPE_CHECKING:
    from drlsched.testbed.controlplane import Testbed


def launch(testbed: Testbed, name: str, binary: Path, args: list[str], ready: Callable[[], bool], timeout_s: float,
           env: Mapping[str, str] | None = None) -> None:
    """Starts `binary` as `name`, records it in the state file, and waits for `ready` (the step's time is kept)."""
    log(f"starting {name}")
    log_file = testbed.state_dir / f"{name}.log"
    started = time.monotonic()
    pid = processes.start([str(binary), *args], log_file, env)
    testbed.processes[name] = {"pid": pid, "binary": str(binary), "log": str(log_file)}
    testbed.save()
    processes.wait_until(ready, timeout_s, lambda: processes.runs(pid, str(binary)), name, log_file)
    testbed.step_seconds[name] = round(time.monotonic() - started, 2)


@contextmanager
def api_client(testbed: Testbed) -> Iterator[kubernetes.client.ApiClient]:
    api = testbed.api_client()
    try:
        yield api
    finally:
        api.close()


def log(message: str) -> None:
    print(f"drlsched: {message}", file=sys.stderr, flush=True)
