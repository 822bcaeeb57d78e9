"""The scheduler-extender HTTP service: POST /filter, /prioritize, /bind; GET /healthz, /readyz, /metrics.

`Extender.handle(verb, body)` is the whole protocol as a pure function (status, JSON payload); the HTTP layer
only frames it. Bad requests get 400 with a message. 500 is kept for our own bugs, which are counted and
logged: kube-scheduler treats any non-200 as an error, and `ignorable: true` makes it schedule without us.
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes

from drlsched import __version__
from drlsched.k8s import prom, wire
from drlsched.k8s.client import call_raw
from drlsched.k8s.metrics_pipeline import MetricsStore
from drlsched.k8s.objects import ObjectError
from drlsched.k8s.placement import Choice, Placer
from drlsched.k8s.rollout import Rollout
from drlsched.k8s.state import ClusterState
from drlsched.policies import Policy

log = logging.getLogger("drlsched.k8s")
VERBS = ("filter", "prioritize", "bind")
ASSUME_TTL_S = 30.0  # an assumption the watch has not confirmed by then was not kube-scheduler's choice
DEFAULT_MAX_BODY = 32 << 20  # 5,000 full Node objects fit; nodeCacheCapable requests are far smaller


def policy_version(name: str) -> str:
    """The policy's identity for /metrics: drlsched's version, plus a checkpoint's content hash if it has one."""
    _, _, path = name.partition(":")
    if path and Path(path).is_file():
        return f"{__version__}+{hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]}"
    return __version__


class Extender:
    def __init__(
        self,
        policy: Policy,
        policy_name: str,
        state: ClusterState | None = None,
        api: kubernetes.client.ApiClient | None = None,
        ready: threading.Event | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        metrics: MetricsStore | None = None,
        rollout: Callable[[Placer, prom.Registry], Rollout] | None = None,
    ) -> None:
        """`state` is the watch-fed cache (nodeCacheCapable); without it every request must carry its Nodes,
        and the cluster is taken as empty of pods (nothing tells us what runs where)."""
        self.placer = Placer(policy, metrics=metrics)
        self.state = state
        self.core = kubernetes.client.CoreV1Api(api) if api is not None else None
        self.ready = ready
        self.max_body = max_body
        reg = self.registry = prom.Registry()
        self.latency = reg.add(prom.Histogram("drlsched_extender_request_duration_seconds", "Handling time by verb."))
        self.requests = reg.add(prom.Counter("drlsched_extender_requests_total", "Requests by verb and HTTP code."))
        self.decisions = reg.add(prom.Counter("drlsched_extender_decisions_total", "Prioritize calls by outcome."))
        self.errors = reg.add(prom.Counter("drlsched_extender_errors_total", "Failed requests by verb and kind."))
        if metrics is not None:
            metrics.register(reg)
            self.fallbacks = metrics.fallbacks
        else:
            self.fallbacks = reg.add(prom.Counter("drlsched_fallbacks_total", "Nodes scored from requests."))
        self.info = reg.add(prom.Gauge("drlsched_policy_info", "The serving policy and its version."))
        self.info.set(1, policy=policy_name, version=policy_version(policy_name))
        self.rollout = rollout(self.placer, reg) if rollout is not None else None
        reg.add(prom.CallbackGauge("drlsched_cache_nodes", "Nodes in the watch cache.", lambda: self._counts()[0]))
        reg.add(prom.CallbackGauge("drlsched_cache_pods", "Pods holding resources.", lambda: self._counts()[1]))

    def _counts(self) -> tuple[int, int]:
        return self.state.counts() if self.state is not None else (0, 0)

    def refused(self, verb: str, status: int, kind: str) -> None:
        """Counts a request the HTTP layer refused before `handle` (too large, unframed)."""
        self.requests.inc(verb=_label(verb), code=str(int(status)))
        self.errors.inc(verb=_label(verb), kind=kind)

    def is_ready(self) -> bool:
        return self.ready is None or self.ready.is_set()

    # --- protocol -----------------------------------------------------------------------------------------

    def handle(self, verb: str, body: bytes) -> tuple[int, Any]:
        """One POST: the HTTP status and the JSON payload to send."""
        started = time.perf_counter()
        try:
            if verb not in VERBS:
                status, payload = HTTPStatus.NOT_FOUND, {"Error": f"unknown verb {verb!r}; use one of {VERBS}"}
            elif verb == "bind":
                status, payload = HTTPStatus.OK, self._bind(wire.binding_args(body))
            else:
                status, payload = HTTPStatus.OK, self._score(verb, wire.extender_args(body))
        except (wire.WireError, ObjectError) as err:
            status, payload = HTTPStatus.BAD_REQUEST, {"Error": str(err)}
            self.errors.inc(verb=_label(verb), kind="bad_request")
        except Exception as err:  # a bug of ours must not take the server down
            log.exception("extender %s failed", verb)
            status, payload = HTTPStatus.INTERNAL_SERVER_ERROR, {"Error": f"internal error: {type(err).__name__}"}
            self.errors.inc(verb=_label(verb), kind="internal")
        self.latency.observe(time.perf_counter() - started, verb=_label(verb))
        self.requests.inc(verb=_label(verb), code=str(int(status)))
        return int(status), payload

    def _state_for(self, args: wire.ExtenderArgs) -> ClusterState:
        if args.node_names is not None:
            if self.state is None:
                raise wire.WireError("NodeNames needs the node cache: start `drlsched serve` with --kubeconfig, "
                                     "or set nodeCacheCapable: false so requests carry Nodes")
            return self.state
        assert args.nodes is not None
        state = ClusterState()  # scores from the request alone: nothing tells us the nodes' pods
        for node in args.nodes:
            state.set_node(node)
        self.fallbacks.inc(reason="request_nodes_only")
        return state

    def _score(self, verb: str, args: wire.ExtenderArgs) -> Any:
        state = self._state_for(args)
        names = args.names()
        if verb == "filter":
            passed, failed = self.placer.filter(state, args.pod, names)
            return wire.filter_result(args, passed, failed)
        routed = self.rollout.route(args.pod, args.ref.namespace) if self.rollout is not None else None
        if state is self.state:
            state.expire_assumed()
        scores, chosen = (routed.placer if routed else self.placer).prioritize(state, args.pod, names)
        if chosen is not None and state is self.state and args.ref.uid:
            # kube-scheduler will almost surely bind the pod where we said (see the weight in deploy/); count
            # it there now, or the next pods are scored before the watch shows this binding.
            state.assume(args.pod, chosen, ASSUME_TTL_S)
        if self.rollout is not None:
            # The shadow sees the same candidates: kube-scheduler's filtered node list.
            self.rollout.observe_shadow(state, args.pod, Choice(chosen, args.pod.gpus, ""), names)
        self.decisions.inc(outcome="placed" if chosen else "no_fit")
        return wire.host_priority_list(scores)

    def _bind(self, args: wire.BindingArgs) -> dict[str, str]:
        if self.core is None:
            return {"Error": "this extender has no kubeconfig and cannot bind"}
        ref = args.ref
        meta = {"name": ref.name, "namespace": ref.namespace, **({"uid": ref.uid} if ref.uid else {})}
        body = {"metadata": meta, "target": {"apiVersion": "v1", "kind": "Node", "name": args.node}}
        try:
            # Raw: the client cannot parse the Status the apiserver answers with (reference §3).
            call_raw(self.core.create_namespaced_pod_binding, ref.name, ref.namespace, body)
        except kubernetes.client.ApiException as err:
            return {"Error": f"binding {ref.namespace}/{ref.name} to {args.node}: {err.status} {err.reason}"}
        return {"Error": ""}


def _label(verb: str) -> str:
    return verb if verb in VERBS else "unknown"


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderServer
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client expects

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; with Nagle on, the body waits for the client's delayed
        # ACK (40 ms on Linux) on every keep-alive request.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        extender = self.server.extender
        verb = self.path.strip("/").split("?", 1)[0]
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length_header is None:
            self._refuse(verb, HTTPStatus.LENGTH_REQUIRED, "unframed", "a Content-Length body is required")
            return
        try:
            length = int(length_header)
        except ValueError:
            self._refuse(verb, HTTPStatus.BAD_REQUEST, "bad_request", "Content-Length is not a number")
            return
        if length < 0 or length > extender.max_body:
            self._refuse(verb, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large",
                         f"body of {length} bytes exceeds the limit of {extender.max_body}")
            return
        body = self.rfile.read(length)
        status, payload = extender.handle(verb, body)
        self._send(status, payload)

    def _refuse(self, verb: str, status: int, kind: str, message: str) -> None:
        self.server.extender.refused(verb, status, kind)
        self._send(status, {"Error": message}, close=True)

    def do_GET(self) -> None:
        extender = self.server.extender
        if self.path == "/healthz":
            self._send_text(HTTPStatus.OK, "ok\n")
        elif self.path == "/readyz":
            ready = extender.is_ready()
            self._send_text(HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE,
                            "ok\n" if ready else "node cache not synced\n")
        elif self.path == "/metrics":
            self._send_text(HTTPStatus.OK, extender.registry.exposition(), "text/plain; version=0.0.4")
        else:
            self._send_text(HTTPStatus.NOT_FOUND, "not found\n")

    def _send(self, status: int, payload: Any, close: bool = False) -> None:
        text = payload if isinstance(payload, wire.RawJson) else json.dumps(payload, separators=(",", ":"))
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:  # the unread body would otherwise be parsed as the next request
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, status: int, text: str, content_type: str = "text/plain") -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # the base class's signature
        log.debug("%s %s", self.address_string(), format % args)


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], extender: Extender) -> None:
        self.extender = extender
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def stop(self) -> None:
        """Stops serving, and also ends kept-alive connections (kube-scheduler reuses one for every call)."""
        self.shutdown()
        self.server_close()
        with self._open_lock:
            for conn in self._open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"
