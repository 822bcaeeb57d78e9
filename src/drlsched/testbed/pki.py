"""Credentials for a loopback control plane: a throwaway CA, the apiserver's serving cert, tokens,
kubeconfigs.

Keys are EC P-256 made with the `openssl` command (no Python crypto package is needed); identities are
static bearer tokens, one per component, so RBAC sees the scheduler as `system:kube-scheduler` exactly as in
a real cluster.
"""

from __future__ import annotations

import base64
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from drlsched.errors import UserError

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
_SERVER_EXT = (
    "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    "basicConstraints=CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth\n"
)
_CLIENT_EXT = (
    "basicConstraints=CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=clientAuth\n"
)
# The name the apiserver's aggregator presents to extension apiservers (metrics-server), which trust it to pass
# the user on in X-Remote-* headers (`--requestheader-allowed-names`).
FRONT_PROXY_NAME = "front-proxy-client"


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]


# The scheduler gets the user name that the RBAC bootstrap policy already binds its roles to.
IDENTITIES = {
    "admin": Identity("drlsched-admin", ("system:masters",)),
    "kube-scheduler": Identity("system:kube-scheduler", ()),
    "kwok": Identity("kwok-controller", ("system:masters",)),
    "metrics-server": Identity("metrics-server", ("system:masters",)),
    # Its controllers run with its own credentials (no per-controller service account tokens exist here).
    "kube-controller-manager": Identity("system:kube-controller-manager", ("system:masters",)),
    "karpenter": Identity("karpenter", ("system:masters",)),
}


@dataclass(frozen=True)
class Pki:
    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def server_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def front_proxy_cert(self) -> Path:
        return self.directory / "front-proxy-client.crt"

    @property
    def front_proxy_key(self) -> Path:
        return self.directory / "front-proxy-client.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    def tokens(self) -> dict[str, str]:
        lines = self.token_file.read_text().splitlines()
        by_user = {line.split(",")[1]: line.split(",")[0] for line in lines}
        return {name: by_user[identity.user] for name, identity in IDENTITIES.items()}


def create_pki(directory: Path) -> Pki:
    if shutil.which("openssl") is None:
        raise UserError("the `openssl` command is not on PATH; the testbed needs it to make its certificates")
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    _openssl(
        "req",
        "-x509",
        *_EC,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=drlsched-testbed-ca",
        cwd=directory,
    )
    _signed(directory, "apiserver", "/CN=kube-apiserver", _SERVER_EXT)
    _signed(directory, "front-proxy-client", f"/CN={FRONT_PROXY_NAME}", _CLIENT_EXT)
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=directory)
    rows = []
    for index, identity in enumerate(IDENTITIES.values()):
        groups = ",".join(identity.groups)
        rows.append(f'{secrets.token_hex(16)},{identity.user},uid-{index},"{groups}"')
    pki.token_file.write_text("\n".join(rows) + "\n")
    pki.token_file.chmod(0o600)
    return pki


def write_kubeconfig(path: Path, server: str, pki: Pki, token: str) -> Path:
    ca_data = base64.b64encode(pki.ca_cert.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "drlsched-testbed", "cluster": {"server": server, "certificate-authority-data": ca_data}}
        ],
        "users": [{"name": "drlsched-testbed", "user": {"token": token}}],
        "contexts": [
            {
                "name": "drlsched-testbed",
                "context": {"cluster": "drlsched-testbed", "user": "drlsched-testbed"},
            }
        ],
        "current-context": "drlsched-testbed",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _signed(directory: Path, name: str, subject: str, extensions: str) -> None:
    """`name`.key and `name`.crt, signed by the testbed's CA."""
    _openssl("req", "-new", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", f"{name}.crt", "-days", "3650", "-extfile", f"{name}.ext",
        cwd=directory,
    )


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"openssl {args[0]} failed: {result.stderr.strip()}")
