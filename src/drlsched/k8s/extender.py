"""The scheduler-extender HTTP service: POST /filter, /prioritize, /bind; GET /healthz, /readyz, /metrics.

`Extender.handle(verb, body)` is the whole protocol as a pure function (status, JSON payload); the HTTP layer
only frames it. Bad requests get 400 with a message. 500 is kept for our own bugs, which are counted and
logged: kube-scheduler treats any non-200 as an error, and `ignorable: true` makes it schedule without us.
"""

from __future__ import annotations

import hashlib
import json
import logging
import ssl
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import kubernetes

from drlsched import __version__
from drlsched.k8s import prom, wire
from drlsched.k8s.client import call_raw
from drlsched.k8s.http_server import HttpServer, Limits, Request, Response
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
DEFAULT_MAX_NODES = 15_000  # Kubernetes' documented largest cluster is 5,000 nodes


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
        max_nodes: int = DEFAULT_MAX_NODES,
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
        self.max_nodes = max_nodes
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
        self._request_nodes: tuple[list[tuple[str, Any]], ClusterState] | None = None  # see `_state_for`
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

    def handle(self, verb: str, body: bytes, trusted: bool = False) -> tuple[int, Any]:
        """One POST: the HTTP status and the JSON payload to send. `trusted`: the caller proved who it is (a
        verified client certificate), so its prioritize calls may add assumptions for pods the watch has not
        shown."""
        started = time.perf_counter()
        try:
            if verb not in VERBS:
                status, payload = HTTPStatus.NOT_FOUND, {"Error": f"unknown verb {verb!r}; use one of {VERBS}"}
            elif verb == "bind":
                status, payload = HTTPStatus.OK, self._bind(wire.binding_args(body))
            else:
                args = wire.extender_args(body, self.max_nodes)
                status, payload = HTTPStatus.OK, self._score(verb, args, trusted)
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
        self.fallbacks.inc(reason="request_nodes_only")
        # kube-scheduler sends the same Node objects again and again: when every node's resourceVersion is the
        # last request's, the cluster built for that request serves (converting 15,000 nodes costs 0.45 s).
        versions = [(n["metadata"]["name"], n["metadata"].get("resourceVersion")) for n in args.nodes]
        last = self._request_nodes
        if last is not None and last[0] == versions:
            return last[1]
        state = ClusterState()  # scores from the request alone: nothing tells us the nodes' pods
        for node in args.nodes:
            state.set_node(node)
        if all(isinstance(version, str) and version for _, version in versions):
            self._request_nodes = (versions, state)
        return state

    def _score(self, verb: str, args: wire.ExtenderArgs, trusted: bool) -> Any:
        state = self._state_for(args)
        names = args.names()
        if verb == "filter":
            passed, failed = self.placer.filter(state, args.pod, names)
            return wire.filter_result(args, passed, failed)
        routed = self.rollout.route(args.pod, args.ref.namespace) if self.rollout is not None else None
        if state is self.state:
            state.expire_assumed()
        scores, chosen = (routed.placer if routed else self.placer).prioritize(state, args.pod, names)
        if chosen is not None and state is self.state and args.ref.uid and (trusted or state.waiting(args.ref.uid)):
            # kube-scheduler will almost surely bind the pod where we said (see the weight in deploy/); count
            # it there now, or the next pods are scored before the watch shows this binding. Only for a pod the
            # watch shows pending, or a caller with a certificate: made-up UIDs must not fill the cache.
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


class _Protocol:
    """The extender behind `HttpServer`: GETs for probes and Prometheus, POSTs for kube-scheduler."""

    def __init__(self, extender: Extender, require_client_cert: bool) -> None:
        self.extender = extender
        self.require_client_cert = require_client_cert

    def get(self, request: Request) -> Response:
        return prom.probe(request.path, self.extender.registry, self.extender.is_ready, "node cache not synced\n")

    def post(self, request: Request) -> Response:
        if self.require_client_cert and not request.authenticated:
            return self.refuse(request, HTTPStatus.FORBIDDEN, "unauthenticated",
                               "a client certificate signed by --tls-client-ca is required")
        status, payload = self.extender.handle(request.path.strip("/"), request.body, trusted=request.authenticated)
        return Response(status, _json(payload))

    def refuse(self, request: Request, status: int, kind: str, message: str) -> Response:
        self.extender.refused(request.path.strip("/"), status, kind)
        return Response(status, _json({"Error": message}), close=True)


def _json(payload: Any) -> bytes:
    text = payload if isinstance(payload, wire.RawJson) else json.dumps(payload, separators=(",", ":"))
    return text.encode()


class ExtenderServer(HttpServer):
    """The extender on `address`; with `tls`, and a client CA in it, POSTs need a verified client certificate."""

    def __init__(self, address: tuple[str, int], extender: Extender, tls: ssl.SSLContext | None = None,
                 limits: Limits | None = None) -> None:
        self.extender = extender
        require = tls is not None and tls.verify_mode != ssl.CERT_NONE
        super().__init__(address, _Protocol(extender, require), limits or Limits(max_body=extender.max_body), tls)
