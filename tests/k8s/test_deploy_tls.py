"""deploy/ serves the extender over TLS with a client certificate, consistently across the three files, and
the commands it runs are ones drlsched accepts (no cluster needed; the testbed test dry-runs the objects)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from drlsched.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _objects(name: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all((DEPLOY / name).read_text()) if o]


def _deployment(name: str) -> dict[str, Any]:
    return next(o for o in _objects(name) if o["kind"] == "Deployment")


def test_the_extender_serves_tls_from_the_mounted_secret_and_requires_client_certificates() -> None:
    pod = _deployment("extender.yaml")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    command = shlex.split(container["command"][-1].removeprefix("exec "))
    args = build_parser().parse_args(command[1:])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    secret = next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]
    assert secret["secretName"] == "drlsched-extender-tls" and mount["readOnly"]
    files = {args.tls_cert, args.tls_key, args.tls_client_ca}
    assert files == {Path(mount["mountPath"]) / key for key in ("tls.crt", "tls.key", "client-ca.crt")}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"  # GETs need no client certificate
    service = next(o for o in _objects("extender.yaml") if o["kind"] == "Service")
    assert service["metadata"]["annotations"]["prometheus.io/scheme"] == "https"


def test_kube_scheduler_calls_the_extender_over_tls_with_a_measured_timeout() -> None:
    (extender,) = yaml.safe_load((DEPLOY / "scheduler-config.yaml").read_text())["extenders"]
    assert extender["urlPrefix"] == "https://drlsched-extender.kube-system.svc:8888"
    assert set(extender["tlsConfig"]) == {"caFile", "certFile", "keyFile"}
    assert extender["httpTimeout"] == "250ms" and extender["ignorable"] is True


def test_the_second_scheduler_may_list_events_for_its_restart_reconciliation() -> None:
    role = next(o for o in _objects("second-scheduler.yaml") if o["kind"] == "ClusterRole")
    events = next(rule for rule in role["rules"] if rule["resources"] == ["events"])
    assert set(events["verbs"]) == {"create", "list"}
    command = _deployment("second-scheduler.yaml")["spec"]["template"]["spec"]["containers"][0]["command"]
    assert build_parser().parse_args(command[1:]).scheduler_name == "drl-scheduler"
