"""The extender under load on loopback (issue 17): p50/p99 latency and the server's RSS and threads, printed
as JSON.

The extender runs in a child process (`drlsched serve` as the Deployment runs it, its node cache filled from
testbed node manifests, profile openb) so that its RSS and thread count are its own. Phases, each bounded in
requests and in time:
- `parallel`: `--clients` (50) keep-alive clients post /prioritize (node names, as nodeCacheCapable
  kube-scheduler does) `--requests` times each, all at once;
- `slow`: `--slow-clients` (100) connections drip a request one byte every `--drip-s` seconds and never finish
  it (reconnecting when the server cuts them) for `--slow-s` seconds, while one client posts /prioritize every
  10 ms;
- `big`: `--big-clients` (4) clients post bodies of full Node objects of about `--big-mib` MiB each, while one
  client polls /healthz.
In every phase `healthz_*` is /healthz latency measured alongside, one probe every 20 ms. Clients are threads
of this process, on the same cores as the server: on a small machine their share of the CPU shows in the
latencies.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from drlsched.k8s.objects import pod_manifest
from drlsched.machine import machine_info
from drlsched.testbed.nodes import node_manifests


def _serve(nodes: int) -> None:
    """The child: an extender with a filled node cache, as `drlsched serve --kubeconfig` would have."""
    from drlsched.k8s.extender import Extender, ExtenderServer
    from drlsched.k8s.state import ClusterState
    from drlsched.policies import make_policy

    state = ClusterState()
    for node in node_manifests(nodes, nodes // 5, "openb"):
        state.set_node(node)
    server = ExtenderServer(("127.0.0.1", 0), Extender(make_policy("k8s-default"), "k8s-default", state))
    print(server.url, flush=True)
    server.serve_forever()


class Server:
    def __init__(self, nodes: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(nodes)], stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert self.proc.stdout is not None
        url = self.proc.stdout.readline().strip()
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.peak_rss_mib = 0.0
        self.peak_threads = 0
        self._sampling = threading.Event()

    def status(self) -> dict[str, int]:
        values = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                values[key] = int(value.split()[0])
        return values

    def sample(self, stop: threading.Event) -> None:
        """Peak RSS and threads while `stop` is unset (every 50 ms)."""
        self.peak_rss_mib, self.peak_threads = 0.0, 0
        while not stop.wait(0.05):
            now = self.status()
            self.peak_rss_mib = max(self.peak_rss_mib, now["VmRSS"] / 1024)
            self.peak_threads = max(self.peak_threads, now["Threads"])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _body(names: list[str], i: int) -> bytes:
    pod = pod_manifest(f"bench-{i}", cpu="2", memory="4Gi", gpus=i % 2)
    pod["metadata"].update(namespace="default", uid=f"bench-{i}")
    return json.dumps({"Pod": pod, "NodeNames": names}).encode()


def _timed(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None) -> tuple[float, int]:
    started = time.perf_counter()
    conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
    response = conn.getresponse()
    response.read()
    return time.perf_counter() - started, response.status


def _client(address: tuple[str, int], method: str, path: str, bodies: list[bytes], count: int,
            deadline: float, stop: threading.Event | None = None, pause_s: float = 0.0) -> tuple[list[float], int]:
    """Latencies of up to `count` keep-alive requests (until `deadline` or `stop`, `pause_s` apart), and the
    failures."""
    latencies, failures = [], 0
    conn = http.client.HTTPConnection(*address, timeout=120)
    for i in range(count):
        if pause_s:
            time.sleep(pause_s)
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            break
        try:
            elapsed, status = _timed(conn, method, path, bodies[i % len(bodies)] if bodies else None)
        except (OSError, http.client.HTTPException):
            failures += 1
            conn.close()
            conn = http.client.HTTPConnection(*address, timeout=120)
            continue
        if status == 200:
            latencies.append(elapsed)
        else:
            failures += 1
    conn.close()
    return latencies, failures


def _summary(latencies: list[float], prefix: str) -> dict[str, Any]:
    if not latencies:
        return {f"{prefix}_requests": 0}
    ms = np.array(latencies) * 1000
    return {f"{prefix}_requests": len(ms), f"{prefix}_p50_ms": round(float(np.percentile(ms, 50)), 2),
            f"{prefix}_p99_ms": round(float(np.percentile(ms, 99)), 2), f"{prefix}_max_ms": round(float(ms.max()), 2)}


def _phase(server: Server, name: str, work: Callable[[threading.Event], dict[str, Any]],
           limit_s: float) -> dict[str, Any]:
    """Runs `work` with RSS sampling and a /healthz poller; `work` gets the event that ends the poller."""
    stop = threading.Event()
    sampler = threading.Thread(target=server.sample, args=(stop,), daemon=True)
    sampler.start()
    with ThreadPoolExecutor(1) as pool:
        health = pool.submit(_client, server.address, "GET", "/healthz", [], 1_000_000,
                             time.monotonic() + limit_s, stop, 0.02)  # a prober, not a load
        started = time.perf_counter()
        result = work(stop)
        elapsed = time.perf_counter() - started
        stop.set()
        health_latencies, health_failures = health.result()
    sampler.join()
    return {"phase": name, "seconds": round(elapsed, 2), **result, **_summary(health_latencies, "healthz"),
            "healthz_failures": health_failures, "server_peak_rss_mib": round(server.peak_rss_mib, 1),
            "server_peak_threads": server.peak_threads}


def _parallel(server: Server, bodies: list[bytes], clients: int, requests: int, limit_s: float) -> dict[str, Any]:
    def work(stop: threading.Event) -> dict[str, Any]:
        deadline = time.monotonic() + limit_s
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda _: _client(server.address, "POST", "/prioritize", bodies, requests,
                                                      deadline), range(clients)))
        latencies = [x for lat, _ in results for x in lat]
        return {"clients": clients, **_summary(latencies, "prioritize"),
                "prioritize_failures": sum(f for _, f in results)}

    return _phase(server, "parallel", work, limit_s)


def _drip(address: tuple[str, int], count: int, drip_s: float, stop: threading.Event) -> dict[str, int]:
    """`count` connections each sending a request that never ends, one byte per `drip_s`."""
    request = b"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + b"X-Pad: " + b"a" * 4096
    socks: list[tuple[socket.socket, int]] = []
    cut = 0
    while not stop.is_set():
        while len(socks) < count:
            try:
                socks.append((socket.create_connection(address, timeout=5), 0))
            except OSError:
                cut += 1
                break
        alive = []
        for sock, sent in socks:
            try:
                sock.sendall(request[sent % len(request):sent % len(request) + 1])
                alive.append((sock, sent + 1))
            except OSError:  # the server closed it (its read timeout): reconnect next round
                sock.close()
                cut += 1
        socks = alive
        stop.wait(drip_s)
    for sock, _ in socks:
        sock.close()
    return {"slow_connections_cut": cut}


def _slow(server: Server, bodies: list[bytes], count: int, drip_s: float, seconds: float) -> dict[str, Any]:
    def work(stop: threading.Event) -> dict[str, Any]:
        drip_stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            dripping = pool.submit(_drip, server.address, count, drip_s, drip_stop)
            time.sleep(2 * drip_s)  # all slow connections open before measuring
            latencies, failures = _client(server.address, "POST", "/prioritize", bodies, 1_000_000,
                                          time.monotonic() + seconds, pause_s=0.01)
            drip_stop.set()
            cut = dripping.result()
        return {"slow_clients": count, **_summary(latencies, "prioritize"), "prioritize_failures": failures, **cut}

    return _phase(server, "slow", work, seconds + 4 * drip_s)


def _big(server: Server, clients: int, mib: float, rounds: int, limit_s: float) -> dict[str, Any]:
    one = node_manifests(1, 0, "openb")[0]
    per_node = len(json.dumps(one))
    items = node_manifests(int(mib * 2**20 / per_node), 0, "openb")
    pod = pod_manifest("big", cpu="1", memory="1Gi")
    pod["metadata"].update(namespace="default", uid="big")
    body = json.dumps({"Pod": pod, "Nodes": {"items": items}}).encode()

    def work(stop: threading.Event) -> dict[str, Any]:
        deadline = time.monotonic() + limit_s
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda _: _client(server.address, "POST", "/prioritize", [body], rounds,
                                                      deadline), range(clients)))
        latencies = [x for lat, _ in results for x in lat]
        return {"big_clients": clients, "body_mib": round(len(body) / 2**20, 1), "nodes_per_body": len(items),
                **_summary(latencies, "prioritize"), "prioritize_failures": sum(f for _, f in results)}

    return _phase(server, "big", work, limit_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=500, help="nodes in the extender's cache (default 500)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=40, help="requests per parallel client")
    parser.add_argument("--slow-clients", type=int, default=100)
    parser.add_argument("--drip-s", type=float, default=0.5)
    parser.add_argument("--slow-s", type=float, default=25.0,
                        help="how long the slow clients drip (longer than the server's 10 s read timeout)")
    parser.add_argument("--big-clients", type=int, default=4)
    parser.add_argument("--big-mib", type=float, default=8.0)
    parser.add_argument("--big-rounds", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=60.0, help="time bound of each phase")
    args = parser.parse_args()
    if args.serve is not None:
        _serve(args.serve)
        return
    server = Server(args.nodes)
    try:
        names = [n["metadata"]["name"] for n in node_manifests(args.nodes, args.nodes // 5, "openb")]
        bodies = [_body(names, i) for i in range(8)]
        _client(server.address, "POST", "/prioritize", bodies, 20, time.monotonic() + 60)  # warm-up
        idle = server.status()
        phases = [
            _parallel(server, bodies, args.clients, args.requests, args.limit_s),
            _slow(server, bodies, args.slow_clients, args.drip_s, min(args.slow_s, args.limit_s)),
            _big(server, args.big_clients, args.big_mib, args.big_rounds, args.limit_s),
        ]
        final = server.status()
    finally:
        server.close()
    print(json.dumps({"benchmark": "extender_load", "machine": machine_info(), "nodes": args.nodes,
                      "server_idle_rss_mib": round(idle["VmRSS"] / 1024, 1),
                      "server_peak_rss_mib": round(final["VmHWM"] / 1024, 1), "phases": phases}, indent=2))


if __name__ == "__main__":
    main()
