"""Starting, probing and stopping the testbed's own processes on loopback, by pid.

A pid is only signalled while /proc says it still runs the binary we started, so a stale state file can
never make `down` kill an unrelated process that reused the pid.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path

from drlsched.errors import UserError
from drlsched.k8s.client import LOOPBACK


def free_ports(count: int) -> list[int]:
    """Distinct ports that were free on loopback a moment ago: the kernel picks them, all bound at once so
    none repeats, then releases them for the processes to take."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def require_free(port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise UserError(f"port {port} on {LOOPBACK} ({what}) is already in use") from None
            raise UserError(f"cannot bind {LOOPBACK}:{port} ({what}): {err.strerror}") from None


def start(argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> int:
    """Starts a daemon in its own session (it outlives the CLI and a Ctrl-C of it) and returns its pid; `env` adds
    to the environment."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **env} if env else None,
        )
    return proc.pid


def runs(pid: int, binary: str) -> bool:
    """Whether `pid` is alive and still the process started from `binary` (zombies count as gone)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and os.path.realpath(exe) == os.path.realpath(binary)


def stop(pid: int, binary: str, grace_s: float = 10.0) -> None:
    if not runs(pid, binary):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not runs(pid, binary):
            _reap(pid)
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    _reap(pid)


def _reap(pid: int) -> None:
    # Our own children must be waited for, or they stay zombies until the CLI exits.
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def http_ok(url: str, context: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_until(ready: Callable[[], bool], timeout_s: float, alive: Callable[[], bool], what: str, log: Path) -> None:
    """Polls `ready` until true; fails early and clearly if the process died or the deadline passed."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if not alive():
            raise UserError(f"{what} exited during start-up: {diagnose(log)}")
        if time.monotonic() > deadline:
            raise UserError(f"{what} not ready after {timeout_s:.0f} s: {diagnose(log)}")
        time.sleep(0.2)


def diagnose(log: Path) -> str:
    """One line for the user: a port clash if the log shows one, else the log's last lines."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return f"no log at {log}"
    for line in lines:
        if "address already in use" in line:
            return f"a port it needs is already in use ({line.strip()[-200:]}); see {log}"
    tail = " | ".join(line.strip()[-200:] for line in lines[-3:])
    return f"{tail} (full log: {log})"
