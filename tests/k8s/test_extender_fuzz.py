"""The extender's protocol handling under generated input: well-formed answers for valid requests, HTTP 400 with
a message for anything else, never a 5xx. In-process (`Extender.handle`), plus the HTTP framing on loopback."""

from __future__ import annotations

import copy
import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drlsched.k8s import quantity
from drlsched.k8s.extender import Extender, ExtenderServer
from drlsched.k8s.objects import node_spec, pod_manifest, pod_spec
from drlsched.k8s.state import ClusterState
from drlsched.policies import make_policy
from drlsched.testbed.nodes import node_manifests

NODES = node_manifests(4, 2, "openb")
NAMES = [n["metadata"]["name"] for n in NODES]


def _cached_state() -> ClusterState:
    state = ClusterState()
    for node in NODES:
        state.set_node(node)
    return state


PLAIN = Extender(make_policy("most-allocated"), "most-allocated")
CACHED = Extender(make_policy("k8s-default"), "k8s-default", state=_cached_state())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
quantities = st.one_of(
    st.sampled_from(["1", "500m", "1Gi", "2", "0", "1e3", "1E999", "-1", "1.5Ki", "Gi", "", "8", "100n"]),
    st.integers(-5, 2**40), st.floats(allow_nan=True), st.text(max_size=8),
)


@st.composite
def valid_pods(draw: st.DrawFn) -> dict[str, Any]:
    pod = pod_manifest(
        draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
        cpu=draw(st.sampled_from(["100m", "1", "8", "200"])),
        memory=draw(st.sampled_from(["1Mi", "1Gi", "64Gi", "2Ti"])),
        gpus=draw(st.integers(0, 9)),
    )
    pod["metadata"].update(namespace="default", uid=draw(st.uuids()).hex)
    return pod


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, bytes]:
    """A valid request, then possibly mutated: one field somewhere replaced by arbitrary JSON."""
    verb = draw(st.sampled_from(["filter", "prioritize", "bind", "filter", "prioritize", "preempt"]))
    if verb == "bind":
        body: Any = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": draw(st.sampled_from(NAMES))}
    else:
        body = {"Pod": draw(valid_pods())}
        chosen = draw(st.lists(st.sampled_from(range(len(NODES))), unique=True, max_size=len(NODES)))
        if draw(st.booleans()):
            body["NodeNames"] = [NAMES[i] for i in chosen] + draw(st.lists(st.text(max_size=6), max_size=2))
        else:
            body["Nodes"] = {"items": [copy.deepcopy(NODES[i]) for i in chosen]}
    for _ in range(draw(st.integers(0, 3))):
        _mutate(draw, body)
    if draw(st.integers(0, 9)) == 0:
        return verb, draw(st.binary(max_size=64))
    return verb, json.dumps(body).encode()


def _mutate(draw: st.DrawFn, body: Any) -> None:
    """Walk down a random path of dicts and lists and replace (or delete) what is there."""
    node = body
    for _ in range(draw(st.integers(0, 6))):
        if isinstance(node, dict) and node:
            child = node[draw(st.sampled_from(sorted(node)))]
        elif isinstance(node, list) and node:
            child = node[draw(st.integers(0, len(node) - 1))]
        else:
            break
        if not isinstance(child, dict | list) or not child:
            break
        node = child
    if isinstance(node, dict) and node:
        key = draw(st.sampled_from(sorted(node)))
        if draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(st.one_of(json_values, quantities))
    elif isinstance(node, list) and node:
        node[draw(st.integers(0, len(node) - 1))] = draw(json_values)


def _check(status: int, payload: Any, verb: str) -> None:
    assert status < 500, payload
    if status != 200:
        assert status in (400, 404) and isinstance(payload["Error"], str) and payload["Error"]
        return
    if verb == "prioritize":
        if isinstance(payload, str):  # in-process: encoded by the extender itself (wire.RawJson)
            payload = json.loads(payload)
        assert all(0 <= hp["Score"] <= 10 and isinstance(hp["Host"], str) for hp in payload)
    elif verb == "filter":
        assert set(payload) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    else:
        assert set(payload) == {"Error"}


FUZZ = settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@FUZZ
@given(requests())
def test_plain_extender_never_fails_on_generated_requests(request: tuple[str, bytes]) -> None:
    verb, body = request
    _check(*PLAIN.handle(verb, body), verb)


@FUZZ
@given(requests())
def test_cached_extender_never_fails_on_generated_requests(request: tuple[str, bytes]) -> None:
    verb, body = request
    _check(*CACHED.handle(verb, body), verb)


def test_the_fuzzing_reached_every_outcome() -> None:
    """Guards against a generator that only ever produces garbage (or only valid requests)."""
    for extender in (PLAIN, CACHED):
        codes = {code for (labels, _) in [(k, v) for k, v in extender.requests.values.items()]
                 for key, code in labels if key == "code"}
        assert {"200", "400"} <= codes
    assert PLAIN.decisions.get(outcome="placed") > 0 and CACHED.decisions.get(outcome="placed") > 0
    assert PLAIN.errors.get(verb="filter", kind="internal") == 0


# --- over HTTP -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ExtenderServer]:
    extender = Extender(make_policy("first-fit"), "first-fit", max_body=1 << 20)
    running = ExtenderServer(("127.0.0.1", 0), extender)
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield running
    running.stop()


def _post(server: ExtenderServer, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_full_node_objects_are_scored_over_http(server: ExtenderServer) -> None:
    pod = pod_manifest("p", gpus=1)
    pod["metadata"]["namespace"] = "default"
    body = json.dumps({"Pod": pod, "Nodes": {"items": NODES}}).encode()
    status, scores = _post(server, "/prioritize", body)
    assert status == 200
    assert scores == [{"Host": n, "Score": 10 if n == "kwok-gpu-00000" else 0} for n in NAMES]
    status, result = _post(server, "/filter", body)
    assert status == 200 and [n["metadata"]["name"] for n in result["Nodes"]["items"]] == NAMES[:2]
    assert set(result["FailedNodes"]) == set(NAMES[2:]) and result["NodeNames"] is None


def test_oversized_and_unframed_bodies_are_refused(server: ExtenderServer) -> None:
    # Refused on the header alone (the server does not read a body it will not accept).
    status, payload = _post(server, "/filter", b"", {"Content-Length": str((1 << 20) + 1)})
    assert status == 413 and "exceeds the limit" in payload["Error"]
    status, payload = _post(server, "/filter", b"{}", {"Content-Length": "nope"})
    assert status == 400
    status, payload = _post(server, "/filter", b'{"Pod": 1, "NodeNames": []}')
    assert status == 400 and "Pod must be a Pod object" in payload["Error"]
    status, payload = _post(server, "/preempt", b"{}")
    assert status == 404


def test_health_readiness_and_metrics(server: ExtenderServer) -> None:
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    for path in ("/healthz", "/readyz"):
        conn.request("GET", path)
        response = conn.getresponse()
        assert response.status == 200 and response.read() == b"ok\n"
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    assert 'drlsched_extender_request_duration_seconds_bucket{verb="filter",le="+Inf"}' in text
    assert 'drlsched_policy_info{policy="first-fit",version=' in text
    assert 'drlsched_extender_requests_total{code="413",verb="filter"} 1' in text


@settings(max_examples=300, deadline=None, database=None)
@given(requests())
def test_generated_requests_over_http_never_get_5xx(server: ExtenderServer, request: tuple[str, bytes]) -> None:
    verb, body = request
    status, payload = _post(server, f"/{verb}", body)
    _check(status, payload, verb)


def test_the_cache_counts_a_prioritized_pod_until_the_watch_confirms_or_time_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState()
    twins = node_manifests(2, 2, "uniform")  # two identical empty GPU nodes: LeastAllocated spreads pods
    for node in twins:
        state.set_node(node)
    extender = Extender(make_policy("k8s-default"), "k8s-default", state=state)
    gpu_nodes = [n["metadata"]["name"] for n in twins]

    def place(uid: str) -> str:
        pod = pod_manifest(uid, cpu="32", memory="1Gi", gpus=2)
        pod["metadata"].update(namespace="default", uid=uid)
        state.set_pod(pod)  # the watch shows it pending: only such pods (or trusted callers') are assumed
        _, payload = extender.handle("prioritize", json.dumps({"Pod": pod, "NodeNames": gpu_nodes}).encode())
        return next(hp["Host"] for hp in json.loads(payload) if hp["Score"] == 10)

    first = place("u1")
    assert place("u2") != first  # u1 is assumed on its node before any watch event
    assert state.pod_node("u1") == first
    monkeypatch.setattr("drlsched.k8s.state.time.monotonic", lambda: 1e12)  # long past the TTL, unconfirmed
    state.expire_assumed()
    assert state.pod_node("u1") is None and state.pod_node("u2") is None


def test_quantities_round_requests_up_and_capacity_down() -> None:
    assert quantity.milli_cpu("0.5m") == 1 and quantity.milli_cpu("0.5m", up=False) == 0
    assert quantity.mebibytes("1.5Mi") == 2 and quantity.mebibytes("1.5Mi", up=False) == 1
    assert quantity.mebibytes("1G") == 954 and quantity.milli_cpu("1e3") == 1_000_000
    node = node_manifests(1, 1, "uniform")[0]
    node["status"]["allocatable"].update(cpu="7999m", memory="1000001Ki")
    spec = node_spec(node)
    assert (spec.cpu_m, spec.mem_mib, spec.gpus, spec.gpu_model) == (7999, 976, 8, "V100")
    pod = pod_manifest("p", cpu="250m", memory="100M", gpus=2)
    pod["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "2"}}}]
    pod["spec"]["overhead"] = {"cpu": "100m"}
    spec_pod = pod_spec(pod)
    assert (spec_pod.cpu_m, spec_pod.mem_mib, spec_pod.gpus) == (2100, 96, 2)
