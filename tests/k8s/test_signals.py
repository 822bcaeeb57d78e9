"""SIGTERM and SIGINT stop `drlsched serve` and `drlsched schedule` whatever thread the kernel hands them to,
right after SIGSTOP/SIGCONT too (once, 2 of 5 such tries hung), and `schedule` abandons a bind that a hung
apiserver never answers instead of waiting it out. Each process must exit 0 on its own: the bound on the wait
is only there to fail the test instead of hanging it."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from drlsched.k8s.objects import pod_manifest
from drlsched.testbed.nodes import node_manifests

EXIT_WAIT_S = 90.0  # the process gives binds 10 s; anything near this bound is a hang


class _HungApiserver(ThreadingHTTPServer):
    """Lists one node and one pending pod of `drl-scheduler`; watches and bindings are never answered."""

    daemon_threads = True

    def __init__(self) -> None:
        self.release = threading.Event()
        self.bindings = threading.Semaphore(0)
        super().__init__(("127.0.0.1", 0), _Api)


class _Api(BaseHTTPRequestHandler):
    server: _HungApiserver
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if "watch=" in self.path:
            self._hang()
            return
        if self.path.startswith("/api/v1/nodes"):
            items: list[dict[str, Any]] = node_manifests(1, 0, "uniform")
        else:
            pod = pod_manifest("p", duration=None)
            pod["metadata"].update(namespace="default", uid="uid-p")
            pod["spec"]["schedulerName"] = "drl-scheduler"
            pod["status"] = {"phase": "Pending"}
            items = [pod]
        self._json({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/binding"):
            self.server.bindings.release()
            self._hang()
            return
        self._json({})

    def _hang(self) -> None:
        self.server.release.wait(EXIT_WAIT_S * 2)
        self.close_connection = True

    def _json(self, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[tuple[_HungApiserver, Path]]:
    server = _HungApiserver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    yield server, kubeconfig
    server.release.set()
    server.shutdown()
    server.server_close()


def _stop_cont_term(proc: subprocess.Popen[str], final: signal.Signals = signal.SIGTERM) -> str:
    proc.send_signal(signal.SIGSTOP)
    proc.send_signal(signal.SIGCONT)
    proc.send_signal(final)
    try:
        _, err = proc.communicate(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"{proc.args} ignored {final.name}") from None
    assert proc.returncode == 0, err
    return err


_TGKILL = {"x86_64": 234, "aarch64": 131}  # syscall numbers: Python has no tgkill


def _signal_thread(pid: int, tid: int, sig: signal.Signals) -> None:
    """Sends `sig` to one thread of another process (`os.kill` lets the kernel pick the thread)."""
    number = _TGKILL.get(platform.machine())
    if number is None:
        os.kill(pid, sig)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(number, pid, tid, int(sig)) == 0, os.strerror(ctypes.get_errno())


def test_serve_stops_when_the_signal_reaches_a_worker_thread() -> None:
    """The case that hung: the main thread sleeping in an untimed wait while another thread takes the signal."""
    proc = subprocess.Popen([sys.executable, "-m", "drlsched.cli", "serve", "--port", "0", "--policy", "first-fit"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("http://127.0.0.1:")
    others = sorted(int(tid) for tid in os.listdir(f"/proc/{proc.pid}/task") if int(tid) != proc.pid)
    assert others  # the HTTP thread at least
    _signal_thread(proc.pid, others[-1], signal.SIGTERM)
    try:
        assert proc.wait(timeout=EXIT_WAIT_S) == 0
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize("final", [signal.SIGTERM, signal.SIGTERM, signal.SIGTERM, signal.SIGINT])
def test_serve_stops_on_a_signal_after_stop_and_continue(final: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "drlsched.cli", "serve", "--port", "0", "--policy", "first-fit"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("http://127.0.0.1:")  # serving: the handlers are installed
    _stop_cont_term(proc, final)


@pytest.mark.parametrize("final", [signal.SIGTERM, signal.SIGTERM, signal.SIGINT])
def test_schedule_stops_on_a_signal_and_abandons_a_bind_the_apiserver_never_answers(
    apiserver: tuple[_HungApiserver, Path], final: signal.Signals,
) -> None:
    server, kubeconfig = apiserver
    proc = subprocess.Popen([sys.executable, "-m", "drlsched.cli", "schedule", "--kubeconfig", str(kubeconfig),
                             "--policy", "first-fit"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.bindings.acquire(timeout=EXIT_WAIT_S)  # the pod was chosen and its bind is hanging
    finally:
        err = _stop_cont_term(proc, final)
    assert "exiting with binds still in flight" in err
