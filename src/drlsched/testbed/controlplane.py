"""`up` and `down` of a local control plane on loopback: etcd, kube-apiserver, kwok, kube-scheduler and, with
`metrics_server`, a real metrics-server scraping kwok's emulated kubelet metrics (metrics.k8s.io, `kubectl top`);
with `controller_manager` the real kube-controller-manager, with `node_autoscaler="karpenter"` Karpenter
(drlsched.testbed.autoscalers).

Everything a running testbed owns lives in one state directory, described by its `state.json` (ports, pids,
binaries, kubeconfig). The file is rewritten after every process start, so `down` can clean up after an `up`
that failed half way.
"""

from __future__ import annotations

import json
import shutil
import ssl
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from drlsched.autoscale.node_groups import NodeGroup
from drlsched.errors import UserError
from drlsched.k8s.objects import node_spec
from drlsched.k8s.reclaim_controller import METRICS_RESOLUTION_S
from drlsched.testbed import karpenter, processes
from drlsched.testbed.audit import audit_args
from drlsched.testbed.autoscalers import HPA_SYNC_PERIOD_S, start_controller_manager, start_karpenter
from drlsched.testbed.build import extra_assets, extra_binary, find_binaries, metrics_server_binary
from drlsched.testbed.kwok_config import kwok_config
from drlsched.testbed.launch import api_client, launch, log
from drlsched.testbed.nodes import exact_node_manifests, node_manifests, profile_names
from drlsched.testbed.pki import FRONT_PROXY_NAME, Pki, create_pki, write_kubeconfig
from drlsched.testbed.pods import create_concurrently
from drlsched.testbed.processes import LOOPBACK
from drlsched.workload import NodeSpec

STATE_FILE = "state.json"
MARKER = ".drlsched-testbed"  # marks a directory as a testbed's, so reusing or wiping it is safe
SCHEDULERS = ("default", "none")
NODE_AUTOSCALERS = ("none", "karpenter")
_API_TIMEOUT_S = 120.0
_NODE_TIMEOUT_S = 300.0
_METRICS_TIMEOUT_S = 180.0


@dataclass
class Options:
    state_dir: Path
    nodes: int = 10
    gpu_nodes: int = 0
    profile: str = "uniform"
    scheduler: str = "default"
    node_specs: Sequence[NodeSpec] | None = None  # exactly these nodes (`nodes` must match; the profile is a label)
    apiserver_port: int = 0  # 0: any free port
    metrics_server: bool = False  # serve metrics.k8s.io from kwok's usage emulation (built on demand)
    controller_manager: bool = False  # the real kube-controller-manager (built on demand)
    hpa_sync_period_s: float = HPA_SYNC_PERIOD_S
    node_autoscaler: str = "none"  # "karpenter" (built on demand)
    node_pools: Sequence[NodeGroup] | None = None  # Karpenter's NodePools; default: the nodes' templates
    node_provision_s: float = 0.0  # a Karpenter node's registration delay (KWOKNodeClass nodeRegistrationDelay)
    consolidate_after_s: float = 0.0  # NodePool spec.disruption.consolidateAfter (upstream default 0s)
    audit_log: bool = False  # the apiserver logs every write (testbed.audit): who wrote what, e.g. per replica


@dataclass
class Testbed:
    """What a caller needs to use a running testbed (also the content of state.json)."""

    state_dir: Path
    kubeconfig: Path
    apiserver_url: str
    kwok_url: str  # kwok's emulated kubelet server (metrics endpoints)
    scheduler: str
    nodes: int
    gpu_nodes: int
    profile: str
    ports: dict[str, int]
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)
    startup_seconds: float = 0.0
    # Seconds each start-up step took: a process until it answered healthy, node creation, nodes until Ready.
    step_seconds: dict[str, float] = field(default_factory=dict)

    def save(self) -> None:
        data = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        tmp = self.state_dir / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.state_dir / STATE_FILE)

    @classmethod
    def load(cls, state_dir: Path) -> Testbed | None:
        path = state_dir / STATE_FILE
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(**{**data, "state_dir": Path(data["state_dir"]), "kubeconfig": Path(data["kubeconfig"])})

    def running(self) -> dict[str, bool]:
        return {name: processes.runs(p["pid"], p["binary"]) for name, p in self.processes.items()}

    def api_client(self) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))


def up(options: Options) -> Testbed:
    _check_options(options)
    binaries = find_binaries()
    if options.metrics_server:
        binaries["metrics-server"] = metrics_server_binary()
    if options.controller_manager:
        binaries["kube-controller-manager"] = extra_binary("kube-controller-manager")
    if options.node_autoscaler == "karpenter":
        binaries["karpenter"] = extra_binary("karpenter")
    state_dir = options.state_dir.resolve()
    _claim_state_dir(state_dir)
    if options.apiserver_port:
        processes.require_free(options.apiserver_port, "kube-apiserver")
    started = time.monotonic()
    names = ("etcd", "etcd-peer", "apiserver", "kwok", "scheduler", "metrics-server", "controller-manager",
             "karpenter-metrics", "karpenter-health")
    ports = dict(zip(names, processes.free_ports(len(names)), strict=True))
    ports["apiserver"] = options.apiserver_port or ports["apiserver"]
    testbed = Testbed(
        state_dir=state_dir,
        kubeconfig=state_dir / "kubeconfig",
        apiserver_url=f"https://{LOOPBACK}:{ports['apiserver']}",
        kwok_url=f"http://{LOOPBACK}:{ports['kwok']}",
        scheduler=options.scheduler,
        nodes=options.nodes,
        gpu_nodes=options.gpu_nodes,
        profile=options.profile,
        ports=ports,
    )
    testbed.save()
    try:
        _start_all(testbed, binaries, options)
    except kubernetes.client.ApiException as err:
        down(state_dir, keep_logs=True)
        raise UserError(f"kube-apiserver refused a start-up request: {err.status} {err.reason}") from None
    except BaseException:
        down(state_dir, keep_logs=True)
        raise
    testbed.startup_seconds = round(time.monotonic() - started, 2)
    testbed.save()
    return testbed


def down(state_dir: Path, keep_logs: bool = False) -> list[str]:
    """Stops every process the testbed started (last first) and removes its state; returns their names."""
    testbed = Testbed.load(state_dir.resolve())
    if testbed is None:
        return []
    stopped = []
    for name, proc in reversed(testbed.processes.items()):
        if processes.runs(proc["pid"], proc["binary"]):
            processes.stop(proc["pid"], proc["binary"])
            stopped.append(name)
    if keep_logs:
        # A failed `up` keeps the logs its error message points at; only the state file goes.
        (testbed.state_dir / STATE_FILE).unlink()
        shutil.rmtree(testbed.state_dir / "etcd", ignore_errors=True)
    else:
        shutil.rmtree(testbed.state_dir, ignore_errors=True)
    return stopped


def _check_options(options: Options) -> None:
    if options.nodes < 1:
        raise UserError("--nodes must be at least 1")
    if not 0 <= options.gpu_nodes <= options.nodes:
        raise UserError(f"--gpu-nodes must be between 0 and --nodes ({options.nodes})")
    if options.node_specs is not None and len(options.node_specs) != options.nodes:
        raise UserError(f"{len(options.node_specs)} node specs for --nodes {options.nodes}")
    if options.node_specs is None and options.profile not in profile_names():
        raise UserError(f"unknown node profile {options.profile!r}; choose one of {', '.join(profile_names())}")
    if options.scheduler not in SCHEDULERS:
        raise UserError(f"unknown scheduler {options.scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
    if options.node_autoscaler not in NODE_AUTOSCALERS:
        raise UserError(f"unknown node autoscaler {options.node_autoscaler!r}; choose one of "
                        f"{', '.join(NODE_AUTOSCALERS)}")
    if options.node_autoscaler == "karpenter" and options.scheduler != "default":
        raise UserError("--node-autoscaler karpenter needs the default scheduler: Karpenter provisions for pods the "
                        "scheduler marked unschedulable")
    if not options.hpa_sync_period_s > 0 or options.node_provision_s < 0 or options.consolidate_after_s < 0:
        raise UserError("the HPA sync period must be positive; the node provisioning delay and consolidateAfter "
                        "must not be negative")


def _claim_state_dir(state_dir: Path) -> None:
    existing = Testbed.load(state_dir)
    if existing is not None:
        if any(existing.running().values()):
            raise UserError(f"a testbed already runs in {state_dir}; stop it with `drlsched testbed down`")
        down(state_dir)  # leftovers of a testbed whose processes are gone
    elif (state_dir / MARKER).exists():
        shutil.rmtree(state_dir)  # logs kept by a failed `up`
    elif state_dir.exists() and any(state_dir.iterdir()):
        raise UserError(f"state directory {state_dir} is not empty and holds no testbed; choose another")
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / MARKER).touch()


def _start_all(testbed: Testbed, binaries: dict[str, Path], options: Options) -> None:
    d = testbed.state_dir
    pki = create_pki(d / "pki")
    tokens = pki.tokens()
    kubeconfigs = {
        name: write_kubeconfig(d / f"{name}.kubeconfig", testbed.apiserver_url, pki, token)
        for name, token in tokens.items()
    }
    kubeconfigs["admin"].rename(testbed.kubeconfig)
    ports = testbed.ports

    etcd_url = f"http://{LOOPBACK}:{ports['etcd']}"
    peer_url = f"http://{LOOPBACK}:{ports['etcd-peer']}"
    launch(
        testbed,
        "etcd",
        binaries["etcd"],
        [
            "--name=testbed",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=testbed={peer_url}",
            "--listen-metrics-urls=",
            "--unsafe-no-fsync",  # throwaway data: durability only costs time
        ],
        lambda: processes.http_ok(f"{etcd_url}/health"),
        60.0,
    )

    ca = ssl.create_default_context(cafile=str(pki.ca_cert))
    apiserver_args = _apiserver_args(ports, etcd_url, pki)
    if options.audit_log:
        apiserver_args += audit_args(d)
    launch(
        testbed,
        "kube-apiserver",
        binaries["kube-apiserver"],
        apiserver_args,
        lambda: (
            processes.http_ok(f"{testbed.apiserver_url}/readyz", ca, tokens["admin"])
            and processes.http_ok(f"{testbed.apiserver_url}/api/v1/namespaces/default", ca, tokens["admin"])
        ),
        _API_TIMEOUT_S,
    )

    (d / "kwok.yaml").write_text(kwok_config())
    launch(
        testbed,
        "kwok",
        binaries["kwok"],
        [
            f"--kubeconfig={kubeconfigs['kwok']}",
            f"--config={d / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address={LOOPBACK}:{ports['kwok']}",
            f"--node-ip={LOOPBACK}",
            f"--node-port={ports['kwok']}",
            "--cidr=10.0.0.1/16",
            # kwok serves TLS and plain HTTP on one port: metrics-server scrapes kubelets over HTTPS only.
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
            "--node-lease-duration-seconds=0",
        ],
        lambda: processes.http_ok(f"{testbed.kwok_url}/healthz"),
        60.0,
    )

    log(f"creating {options.nodes} fake nodes ({options.gpu_nodes} with GPUs, profile {options.profile})")
    manifests = (exact_node_manifests(options.node_specs) if options.node_specs is not None
                 else node_manifests(options.nodes, options.gpu_nodes, options.profile))
    with api_client(testbed) as api:
        started = time.monotonic()
        create_concurrently(kubernetes.client.CoreV1Api(api).create_node, manifests)
        testbed.step_seconds["create-nodes"] = round(time.monotonic() - started, 2)

    if options.scheduler == "default":
        start_scheduler(testbed)

    with api_client(testbed) as api:
        started = time.monotonic()
        _wait_nodes_ready(api, options.nodes)
        testbed.step_seconds["nodes-ready"] = round(time.monotonic() - started, 2)

    if options.controller_manager:
        start_controller_manager(testbed, binaries["kube-controller-manager"], options.hpa_sync_period_s)
    if options.metrics_server:
        start_metrics_server(testbed, binaries["metrics-server"])
    if options.node_autoscaler == "karpenter":
        pools = options.node_pools or karpenter.pools_for([node_spec(m) for m in manifests])
        start_karpenter(testbed, binaries["karpenter"], extra_assets("karpenter"), pools, options.node_provision_s,
                        options.consolidate_after_s)


def start_metrics_server(testbed: Testbed, binary: Path | None = None) -> None:
    """Starts metrics-server behind the aggregator (APIService v1beta1.metrics.k8s.io) and waits until it serves
    NodeMetrics. As kwokctl does, the APIService points at an ExternalName Service naming the loopback address."""
    if processes_running(testbed, "metrics-server"):
        raise UserError(f"the testbed in {testbed.state_dir} already runs metrics-server")
    d = testbed.state_dir
    pki = Pki(d / "pki")
    port = testbed.ports["metrics-server"]
    with api_client(testbed) as api:
        _register_metrics_api(api, port)
    args = [
        f"--kubeconfig={d / 'metrics-server.kubeconfig'}",
        f"--authentication-kubeconfig={d / 'metrics-server.kubeconfig'}",
        f"--authorization-kubeconfig={d / 'metrics-server.kubeconfig'}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        f"--tls-cert-file={pki.server_cert}",
        f"--tls-private-key-file={pki.server_key}",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",  # kwok's port, from each node's daemonEndpoints
        "--kubelet-insecure-tls",  # kwok serves the apiserver's certificate, which names 127.0.0.1, not nodes
        f"--metric-resolution={METRICS_RESOLUTION_S}s",
        "--kubelet-request-timeout=5s",  # must stay under 0.9 x the resolution
    ]
    insecure = ssl._create_unverified_context()
    launch(
        testbed,
        "metrics-server",
        binary or metrics_server_binary(),
        args,
        lambda: processes.http_ok(f"https://{LOOPBACK}:{port}/healthz", insecure),
        60.0,
    )
    started = time.monotonic()
    with api_client(testbed) as api:
        _wait_node_metrics(api, testbed.nodes)
    testbed.step_seconds["node-metrics"] = round(time.monotonic() - started, 2)
    testbed.save()


def stop_process(testbed: Testbed, name: str) -> bool:
    """Stops one of the testbed's processes (e.g. metrics-server, to make metrics stale); whether it ran."""
    proc = testbed.processes.pop(name, None)
    testbed.save()
    if proc is None or not processes.runs(proc["pid"], proc["binary"]):
        return False
    processes.stop(proc["pid"], proc["binary"])
    return True


def restart_apiserver(testbed: Testbed, audit_log: bool = False) -> None:
    """Stops kube-apiserver and starts it again on the same port, etcd and certificates: its watch caches start
    cold and every client's connections and watches break, as on a control-plane upgrade."""
    stop_process(testbed, "kube-apiserver")
    pki = Pki(testbed.state_dir / "pki")
    admin = pki.tokens()["admin"]
    ca = ssl.create_default_context(cafile=str(pki.ca_cert))
    args = _apiserver_args(testbed.ports, f"http://{LOOPBACK}:{testbed.ports['etcd']}", pki)
    if audit_log:
        args += audit_args(testbed.state_dir)
    launch(testbed, "kube-apiserver", find_binaries()["kube-apiserver"], args,
           lambda: processes.http_ok(f"{testbed.apiserver_url}/readyz", ca, admin), _API_TIMEOUT_S)
    testbed.save()


def processes_running(testbed: Testbed, name: str) -> bool:
    proc = testbed.processes.get(name)
    return proc is not None and processes.runs(proc["pid"], proc["binary"])


def _register_metrics_api(api: kubernetes.client.ApiClient, port: int) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "metrics-server", "namespace": "kube-system"},
        "spec": {"type": "ExternalName", "externalName": LOOPBACK, "ports": [{"name": "https", "port": port}]},
    }
    apiservice = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": {
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "service": {"name": "metrics-server", "namespace": "kube-system", "port": port},
            "insecureSkipTLSVerify": True,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    core = kubernetes.client.CoreV1Api(api)
    registration = kubernetes.client.ApiregistrationV1Api(api)
    for create, body in ((lambda b: core.create_namespaced_service("kube-system", b), service),
                         (registration.create_api_service, apiservice)):
        try:
            create(body)
        except kubernetes.client.ApiException as err:
            if err.status != 409:  # left by an earlier start on this testbed: same content
                raise


def _wait_node_metrics(api: kubernetes.client.ApiClient, expected: int) -> None:
    deadline = time.monotonic() + _METRICS_TIMEOUT_S
    seen = 0
    while time.monotonic() < deadline:
        try:
            body = kubernetes.client.CustomObjectsApi(api).list_cluster_custom_object("metrics.k8s.io", "v1beta1",
                                                                                      "nodes")
            seen = len(body.get("items") or [])
            if seen >= expected:
                return
        except kubernetes.client.ApiException:
            pass  # 503 until the aggregator sees metrics-server available
        time.sleep(1.0)
    raise UserError(f"metrics-server served NodeMetrics for {seen} of {expected} nodes in {_METRICS_TIMEOUT_S:.0f} s")


def start_scheduler(testbed: Testbed, config: dict[str, Any] | None = None) -> None:
    """Starts the real kube-scheduler on a testbed that has none (e.g. once pods are queued, to time it).

    `config` adds top-level KubeSchedulerConfiguration fields, e.g. `extenders` (drlsched's extender tests)."""
    if "kube-scheduler" in testbed.processes:
        raise UserError(f"the testbed in {testbed.state_dir} already has a kube-scheduler")
    d = testbed.state_dir
    kubeconfig = d / "kube-scheduler.kubeconfig"
    (d / "scheduler.yaml").write_text(yaml.safe_dump({**_scheduler_config(kubeconfig), **(config or {})}))
    port = testbed.ports["scheduler"]
    args = [
        f"--config={d / 'scheduler.yaml'}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        # Lets benchmarks read scheduler_* metrics without setting up RBAC for a metrics reader.
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
    ]
    # The scheduler serves an in-memory self-signed certificate: its health is all we read from it.
    insecure = ssl._create_unverified_context()

    def healthy() -> bool:
        return processes.http_ok(f"https://{LOOPBACK}:{port}/healthz", insecure)

    launch(testbed, "kube-scheduler", find_binaries()["kube-scheduler"], args, healthy, 60.0)
    testbed.scheduler = "default"
    testbed.save()


def _apiserver_args(ports: dict[str, int], etcd_url: str, pki: Pki) -> list[str]:
    return [
        f"--etcd-servers={etcd_url}",
        # Without an advertise address the apiserver derives one from the default route, which may not exist.
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={ports['apiserver']}",
        f"--tls-cert-file={pki.server_cert}",
        f"--tls-private-key-file={pki.server_key}",
        f"--token-auth-file={pki.token_file}",
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.service_account_key}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        "--service-cluster-ip-range=10.96.0.0/16",
        # No controller manager runs: nothing would create the `default` ServiceAccount that the
        # ServiceAccount plugin demands, nor lift the not-ready taint TaintNodesByCondition puts on new nodes.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
        "--allow-privileged=true",
        # One client (the scheduler) must not be throttled by the fairness queues sized for shared clusters.
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight=0",
        "--max-mutating-requests-inflight=0",
        # The aggregator (metrics.k8s.io): its client certificate, and what extension apiservers trust it with.
        f"--proxy-client-cert-file={pki.front_proxy_cert}",
        f"--proxy-client-key-file={pki.front_proxy_key}",
        f"--requestheader-client-ca-file={pki.ca_cert}",
        # Published to delegating servers (kube-scheduler, metrics-server) with the above; without it they log an
        # error on every resync. Certificates signed by this CA then authenticate; only the front proxy's exists.
        f"--client-ca-file={pki.ca_cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_NAME}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    ]


def _scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        # The default 50 QPS would cap binding at ~25 pods/s (a bind and an event per pod), measuring the
        # client limiter rather than the scheduler; kwokctl and scheduler_perf lift it the same way.
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 10000},
        "leaderElection": {"leaderElect": False},
    }


def _wait_nodes_ready(api: kubernetes.client.ApiClient, expected: int) -> None:
    core = kubernetes.client.CoreV1Api(api)
    deadline = time.monotonic() + _NODE_TIMEOUT_S
    while True:
        items = json.loads(core.list_node(_preload_content=False).data)["items"]
        ready = sum(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
            for n in items
        )
        if ready >= expected:
            return
        if time.monotonic() > deadline:
            raise UserError(f"only {ready} of {expected} nodes became Ready in {_NODE_TIMEOUT_S:.0f} s")
        time.sleep(0.5)
