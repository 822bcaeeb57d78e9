"""drlsched controller replicas as separate processes against a testbed (the leader-election test and bench): each
logs to its own file, and its leader-election identity is read from that log."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import kubernetes

import drlsched
from drlsched.k8s.client import call_raw

_IDENTITY = re.compile(r"leader election on lease \S+ as (\S+)")


class Replica:
    def __init__(self, name: str, argv: list[str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        env = dict(os.environ)
        # This checkout's drlsched, whatever the venv's editable install points at.
        env["PYTHONPATH"] = os.pathsep.join([str(Path(drlsched.__file__).parents[1]), env.get("PYTHONPATH", "")])
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "drlsched.cli", *argv], stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env)
        self.started = time.time()

    def identity(self, timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = _IDENTITY.search(self.log_path.read_text(errors="replace"))
            if match:
                return match.group(1)
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited {self.proc.returncode}: {self.log()[-2000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"replica {self.name} logged no identity in {timeout_s:.0f} s")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> float:
        """SIGKILL (a crash: no lease release); the wall time it was sent."""
        at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        return at

    def terminate(self, timeout_s: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self._log.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._log.close()


def lease(api: kubernetes.client.ApiClient, name: str, namespace: str = "default") -> dict[str, Any] | None:
    """The Lease's spec, or None while it does not exist."""
    try:
        body = call_raw(kubernetes.client.CoordinationV1Api(api).read_namespaced_lease, name, namespace)
    except kubernetes.client.ApiException as err:
        if err.status == 404:
            return None
        raise
    return dict(json.loads(body).get("spec") or {})
