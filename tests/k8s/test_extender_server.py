"""The extender's HTTP server under hostile or unlucky clients, on loopback: stalled requests hold no worker
and are closed, /healthz is answered while every worker is busy, 50 parallel clients are all served, the
connection cap evicts idle connections, and TLS with a client certificate guards the verbs.

No timing assertions: every wait is generous, and what is checked is what happens, not how fast."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from drlsched.k8s.extender import Extender, ExtenderServer
from drlsched.k8s.http_server import HttpServer, Limits, Request, Response, tls_context
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.state import ClusterState
from drlsched.policies import make_policy
from drlsched.testbed.nodes import node_manifests
from drlsched.testbed.pki import create_pki

WAIT_S = 60.0  # a bound on waits that normally take milliseconds: only a hang reaches it
NODES = node_manifests(4, 2, "openb")
NAMES = [n["metadata"]["name"] for n in NODES]


def _body(uid: str = "u") -> bytes:
    pod = pod_manifest("p", gpus=1)
    pod["metadata"].update(namespace="default", uid=uid)
    return json.dumps({"Pod": pod, "NodeNames": NAMES}).encode()


def _cached_extender() -> Extender:
    state = ClusterState()
    for node in NODES:
        state.set_node(node)
    return Extender(make_policy("k8s-default"), "k8s-default", state=state)


def _start(server: HttpServer) -> HttpServer:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def server() -> Iterator[ExtenderServer]:
    limits = Limits(header_timeout_s=1.0, idle_timeout_s=30.0, workers=2, max_connections=256)
    running = ExtenderServer(("127.0.0.1", 0), _cached_extender(), limits=limits)
    _start(running)
    yield running
    running.stop()


def _request(server: HttpServer, method: str, path: str, body: bytes | None = None,
             context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    host, port = server.server_address[:2]
    conn = (http.client.HTTPSConnection(host, port, timeout=WAIT_S, context=context) if context
            else http.client.HTTPConnection(host, port, timeout=WAIT_S))
    try:
        conn.request(method, path, body, {"Content-Type": "application/json"} if body is not None else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _closed_by_server(sock: socket.socket) -> bool:
    """Reads until the server closes (True) or WAIT_S passes (False)."""
    sock.settimeout(WAIT_S)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def test_stalled_requests_hold_no_worker_and_are_closed(server: ExtenderServer) -> None:
    host, port = server.server_address[:2]
    threads = threading.active_count()
    stalled = []
    for i in range(100):
        sock = socket.create_connection((host, port), timeout=WAIT_S)
        # Half a request: headers promise a body that never comes, or the headers never end.
        sock.sendall(b"POST /prioritize HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{" if i % 2 else
                     b"POST /prioritize HTTP/1.1\r\nContent-Le")
        stalled.append(sock)
    status, body = _request(server, "GET", "/healthz")
    assert (status, body) == (200, b"ok\n")
    status, body = _request(server, "POST", "/prioritize", _body())
    assert status == 200 and len(json.loads(body)) == len(NAMES)
    assert threading.active_count() <= threads + 2  # Limits.workers at most, whatever the connections
    assert all(_closed_by_server(sock) for sock in stalled)  # after header_timeout_s
    for sock in stalled:
        sock.close()


def test_an_idle_connection_before_its_first_byte_waits_for_the_idle_timeout_only(server: ExtenderServer) -> None:
    """The header timeout starts at the first byte: a kept-alive connection between requests is not cut."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=WAIT_S)
    for _ in range(2):
        conn.request("POST", "/prioritize", _body(), {"Content-Type": "application/json"})
        assert conn.getresponse().read()
        threading.Event().wait(1.5)  # longer than header_timeout_s, far shorter than idle_timeout_s
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok\n"
    conn.close()


def test_fifty_parallel_clients_are_all_served(server: ExtenderServer) -> None:
    def client(k: int) -> list[int]:
        host, port = server.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=WAIT_S)
        codes = []
        for i in range(10):
            conn.request("POST", "/prioritize", _body(f"u{k}-{i}"), {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            codes.append(response.status)
        conn.close()
        return codes

    with ThreadPoolExecutor(50) as pool:
        codes = [code for result in pool.map(client, range(50)) for code in result]
    assert codes == [200] * 500


def test_health_is_answered_while_every_worker_and_the_get_thread_are_busy() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    class Blocking:
        def get(self, request: Request) -> Response:
            if request.path == "/metrics":  # as if waiting for the cache's lock
                entered.release()
                release.wait(WAIT_S)
            return Response(200, b"ok\n", "text/plain")

        def post(self, request: Request) -> Response:
            entered.release()
            release.wait(WAIT_S)
            return Response(200, b"{}")

        def refuse(self, request: Request, status: int, kind: str, message: str) -> Response:
            return Response(status, message.encode(), close=True)

    server = _start(HttpServer(("127.0.0.1", 0), Blocking(), Limits(workers=2)))
    try:
        with ThreadPoolExecutor(5) as pool:
            posts = [pool.submit(_request, server, "POST", "/x", b"{}") for _ in range(4)]
            metrics = pool.submit(_request, server, "GET", "/metrics")
            for _ in range(3):  # both workers and the GET thread blocked
                assert entered.acquire(timeout=WAIT_S)
            assert _request(server, "GET", "/healthz") == (200, b"ok\n")
            assert not any(post.done() for post in posts) and not metrics.done()
            release.set()
            assert [post.result(timeout=WAIT_S)[0] for post in posts] == [200] * 4
            assert metrics.result(timeout=WAIT_S)[0] == 200
    finally:
        release.set()
        server.stop()


def test_at_the_connection_cap_the_longest_idle_connection_makes_room() -> None:
    server = _start(ExtenderServer(("127.0.0.1", 0), _cached_extender(), limits=Limits(max_connections=2)))
    try:
        host, port = server.server_address[:2]
        idle = [http.client.HTTPConnection(host, port, timeout=WAIT_S) for _ in range(2)]
        for conn in idle:
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok\n"  # both now kept alive, idle
        assert _request(server, "GET", "/healthz") == (200, b"ok\n")  # a third is served
        sock = idle[0].sock
        assert sock is not None and _closed_by_server(sock)  # the oldest idle one was closed for it
    finally:
        server.stop()


def test_framing_errors_are_answered_and_counted(server: ExtenderServer) -> None:
    host, port = server.server_address[:2]

    def raw(data: bytes) -> bytes:
        with socket.create_connection((host, port), timeout=WAIT_S) as sock:
            sock.sendall(data)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    assert raw(b"POST /filter HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n").startswith(b"HTTP/1.1 413 ")
    assert raw(b"POST /filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").startswith(b"HTTP/1.1 411 ")
    assert raw(b"POST /filter HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").startswith(
        b"HTTP/1.1 400 ")
    assert raw(b"POST /filter HTTP/1.1\r\nX: " + b"a" * (64 << 10) + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
    assert raw(b"POST /filter HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n").startswith(b"HTTP/1.1 431 ")
    assert raw(b"DELETE /filter HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert raw(b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    body = _body()
    answer = raw(b"POST /prioritize HTTP/1.1\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    metrics = _request(server, "GET", "/metrics")[1].decode()
    assert 'drlsched_extender_requests_total{code="413",verb="filter"} 1' in metrics
    assert 'drlsched_extender_errors_total{kind="unframed",verb="filter"} 1' in metrics


# --- TLS ---------------------------------------------------------------------------------------------------


def _client_cert(pki_dir: Path, name: str, ca: str = "ca") -> tuple[Path, Path]:
    (pki_dir / "client.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    run = {"cwd": pki_dir, "check": True, "capture_output": True}
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}"], **run)
    subprocess.run(["openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                    "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile", "client.ext"], **run)
    return pki_dir / f"{name}.crt", pki_dir / f"{name}.key"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("pki")
    made = create_pki(directory)
    rogue = tmp_path_factory.mktemp("rogue")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=rogue"],
                   cwd=rogue, check=True, capture_output=True)
    return {"ca": made.ca_cert, "cert": made.server_cert, "key": made.server_key,
            "client": _client_cert(directory, "kube-scheduler"), "rogue": _client_cert(rogue, "intruder")}


def _client_context(pki: dict[str, Any], identity: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki["ca"])
    if identity is not None:
        context.load_cert_chain(*pki[identity])
    return context


def test_tls_verbs_need_a_client_certificate_from_the_ca(pki: dict[str, Any]) -> None:
    extender = _cached_extender()
    server = _start(ExtenderServer(("127.0.0.1", 0), extender, tls_context(pki["cert"], pki["key"], pki["ca"])))
    try:
        assert server.url.startswith("https://127.0.0.1:")
        trusted = _client_context(pki, "client")
        status, body = _request(server, "POST", "/prioritize", _body("tls-pod"), trusted)
        assert status == 200
        assert extender.state is not None and extender.state.pod_node("tls-pod") is not None  # trusted: assumed
        anonymous = _client_context(pki, None)
        status, body = _request(server, "POST", "/prioritize", _body("anon-pod"), anonymous)
        assert status == 403 and b"client certificate" in body
        assert extender.state.pod_node("anon-pod") is None
        assert _request(server, "GET", "/healthz", context=anonymous) == (200, b"ok\n")  # probes need none
        with pytest.raises((ssl.SSLError, ConnectionError)):  # a certificate from another CA: no handshake
            _request(server, "POST", "/prioritize", _body(), _client_context(pki, "rogue"))
        with pytest.raises((http.client.HTTPException, ConnectionError)):  # plain HTTP to the TLS port
            _request(server, "GET", "/healthz")
        assert _request(server, "GET", "/healthz", context=trusted) == (200, b"ok\n")  # still serving
    finally:
        server.stop()
