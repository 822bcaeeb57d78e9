"""Builds the control-plane binaries from the Go wrapper modules in `testbed/` into a version-keyed cache.

The cache lives outside the clone (`~/.cache/drlsched/testbed/<key>/bin`); the key holds every pinned
version and a hash of the wrapper modules' go.mod/go.sum, so a version bump builds into a fresh directory
and an unchanged pin reuses the binaries. Nothing built ever lands in the repository.

The optional extras (`EXTRAS`: metrics-server, kube-controller-manager, Karpenter with its KWOK provider) each have
a key of their own (`build_extra(name)`, `testbed build --metrics-server --controller-manager --karpenter`, or on
demand by `testbed up`): adding one leaves the core binaries' key, and so their cache, as it was, and a missing
extra never blocks a testbed that does not ask for it.

A module whose `go` line is newer than the local toolchain (Karpenter v1.15.0 asks for Go 1.26.9) is built with
that toolchain, which the go command fetches from the module proxy (`golang.org/toolchain`); its key names it.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from drlsched.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[3]
MODULES_DIR = REPO_ROOT / "testbed"
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kwok")
_POLL_S = 30.0


@dataclass(frozen=True)
class Component:
    """One wrapper module and the main packages built from it."""

    module: str  # directory under testbed/
    dependency: str  # the pinned upstream module whose version names the build
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    # Files of the dependency's module (globs inside its directory) copied into the build's `assets/`, e.g. CRDs.
    assets: tuple[str, ...] = ()


COMPONENTS = (
    Component("etcd", "go.etcd.io/etcd/server/v3", ("go.etcd.io/etcd/server/v3",), ("etcd",)),
    Component(
        "k8s",
        "k8s.io/kubernetes",
        ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler"),
        ("kube-apiserver", "kube-scheduler"),
    ),
    Component("kwok", "sigs.k8s.io/kwok", ("sigs.k8s.io/kwok/cmd/kwok",), ("kwok",)),
)
METRICS_SERVER = Component(
    "metrics-server",
    "sigs.k8s.io/metrics-server",
    ("sigs.k8s.io/metrics-server/cmd/metrics-server",),
    ("metrics-server",),
)
# Same k8s.io/kubernetes pin as testbed/k8s (tests/testbed/test_build_pins.py checks), a module of its own so that
# its extra dependencies leave the core key alone.
CONTROLLER_MANAGER = Component(
    "kube-controller-manager",
    "k8s.io/kubernetes",
    ("k8s.io/kubernetes/cmd/kube-controller-manager",),
    ("kube-controller-manager",),
)
# The `kwok` main package: Karpenter's core controllers with the KWOK cloud provider, which creates Node objects.
KARPENTER = Component(
    "karpenter",
    "sigs.k8s.io/karpenter",
    ("sigs.k8s.io/karpenter/kwok",),
    ("karpenter",),
    assets=("kwok/charts/crds/*.yaml", "kwok/apis/crds/*.yaml"),
)
EXTRAS = {c.module: c for c in (METRICS_SERVER, CONTROLLER_MANAGER, KARPENTER)}


def cache_root() -> Path:
    return Path(os.environ.get("DRLSCHED_CACHE", Path.home() / ".cache" / "drlsched")) / "testbed"


def pinned_version(component: Component) -> str:
    text = _read(MODULES_DIR / component.module / "go.mod")
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(component.dependency)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise UserError(f"testbed/{component.module}/go.mod does not require {component.dependency}")
    return match.group(1)


def go_version() -> str:
    try:
        out = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        raise UserError("the Go toolchain (`go`) is not on PATH; it is needed to build the testbed") from None
    except subprocess.CalledProcessError as err:
        raise UserError(f"`go env GOVERSION` failed: {err.stderr.strip()}") from None
    return out.strip()


def _go_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def toolchain(component: Component) -> str:
    """The Go toolchain that builds `component`: the local one, or the module's `go` line where that is newer."""
    local = go_version()
    match = re.search(r"^go\s+(\S+)", _read(MODULES_DIR / component.module / "go.mod"), re.MULTILINE)
    wanted = match.group(1) if match else ""
    return f"go{wanted}" if wanted and _go_tuple(wanted) > _go_tuple(local) else local


def build_key(components: tuple[Component, ...] = COMPONENTS) -> str:
    digest = hashlib.sha256()
    for component in components:
        for name in ("go.mod", "go.sum"):
            digest.update(_read(MODULES_DIR / component.module / name).encode())
        if component.assets:  # what the build copies is part of what it made
            digest.update("\n".join(component.assets).encode())
    versions = "-".join(f"{c.module}{pinned_version(c)}" for c in components)
    go = max((toolchain(c) for c in components), key=_go_tuple)
    return f"{versions}-{go}-{digest.hexdigest()[:8]}"


def bin_dir() -> Path:
    """Where the binaries of the current pins live (built or not)."""
    override = os.environ.get("DRLSCHED_TESTBED_BIN")
    return Path(override) if override else cache_root() / build_key() / "bin"


def find_binaries() -> dict[str, Path]:
    """Paths of the built binaries, or a clear error naming the ones missing and how to build them."""
    directory = bin_dir()
    paths = {name: directory / name for name in BINARIES}
    missing = [name for name, path in paths.items() if not os.access(path, os.X_OK)]
    if missing:
        raise UserError(f"testbed binaries missing in {directory}: {', '.join(missing)}; run `drlsched testbed build`")
    return paths


def extra_binary(name: str) -> Path:
    """An extra's binary (`EXTRAS`), built first if the cache lacks it (DRLSCHED_TESTBED_BIN may hold one too)."""
    component = EXTRAS[name]
    binary = component.binaries[0]
    override = os.environ.get("DRLSCHED_TESTBED_BIN")
    if override and os.access(Path(override) / binary, os.X_OK):
        return Path(override) / binary
    return build_extra(name) / binary


def metrics_server_binary() -> Path:
    return extra_binary("metrics-server")


def extra_assets(name: str) -> list[Path]:
    """The files an extra's build copied from its module (Karpenter's CRDs), built first if the cache lacks them."""
    return sorted((build_extra(name).parent / "assets").glob("*"))


def build(force: bool = False) -> Path:
    """Builds every core binary unless the cache already holds them; returns the bin directory."""
    return _build_bundle(COMPONENTS, force)


def build_extra(name: str = "metrics-server", force: bool = False) -> Path:
    """Builds one of the `EXTRAS` unless the cache already holds it; returns its bin directory."""
    if name not in EXTRAS:
        raise UserError(f"unknown testbed extra {name!r}; choose one of {', '.join(EXTRAS)}")
    return _build_bundle((EXTRAS[name],), force)


def _build_bundle(components: tuple[Component, ...], force: bool) -> Path:
    key = build_key(components)
    target = cache_root() / key
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two clones (or CI jobs) sharing a cache must not build the same key twice at once.
    with open(cache_root() / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "build.json").exists() and not force:
            _log(f"testbed binaries up to date in {target / 'bin'}")
            return target / "bin"
        staging = target.with_name(f".{key}.partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bin").mkdir(parents=True)
        started = time.monotonic()
        timings = {c.module: _build_component(c, staging / "bin") for c in components}
        for c in components:
            _copy_assets(c, staging / "assets")
        record = {
            "key": key,
            "go": max((toolchain(c) for c in components), key=_go_tuple),
            "versions": {c.dependency: pinned_version(c) for c in components},
            "build_seconds": round(time.monotonic() - started, 1),
            "component_seconds": timings,
            "binary_bytes": {name: (staging / "bin" / name).stat().st_size for c in components for name in c.binaries},
            "cpus": os.cpu_count(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (staging / "build.json").write_text(json.dumps(record, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        _log(f"testbed binaries built in {record['build_seconds']} s into {target / 'bin'}")
        return target / "bin"


def build_record(components: tuple[Component, ...] = COMPONENTS) -> dict[str, object] | None:
    path = cache_root() / build_key(components) / "build.json"
    return json.loads(path.read_text()) if path.exists() else None


def build_versions() -> dict[str, object]:
    """The built components' versions, Go's and the build key: what testbed benchmarks print beside their figures."""
    record = build_record() or {}
    return {"versions": record.get("versions"), "go": record.get("go"), "build_key": record.get("key")}


def _build_component(component: Component, out: Path) -> float:
    version = pinned_version(component)
    _log(f"building {', '.join(component.binaries)} ({component.dependency} {version}) ...")
    ldflags = "-s -w"
    if component.module == "k8s":
        # Unstamped builds report v0.0.0-master; stamping gives clean `--version` output and logs.
        major, minor = version.lstrip("v").split(".")[:2]
        ldflags += (
            f" -X k8s.io/component-base/version.gitVersion={version}"
            f" -X k8s.io/component-base/version.gitMajor={major}"
            f" -X k8s.io/component-base/version.gitMinor={minor}"
        )
    elif component.module == "metrics-server":
        ldflags += f" -X k8s.io/client-go/pkg/version.gitVersion={version}"  # as its Makefile stamps it
    elif component.module == "karpenter":
        ldflags += f" -X sigs.k8s.io/karpenter/pkg/operator.Version={version}"  # as its release build stamps it
    go = toolchain(component)
    env = {**_go_env(go), "CGO_ENABLED": "0"}
    # One package: name the binary (etcd's would be "server"); several: go names each after its directory.
    target = f"{out}/{component.binaries[0]}" if len(component.packages) == 1 else f"{out}/"
    cmd = ["nice", "-n", "10", "go", "build", "-trimpath", "-ldflags", ldflags, "-o", target]
    started = time.monotonic()
    proc = subprocess.Popen(
        [*cmd, *component.packages],
        cwd=MODULES_DIR / component.module,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    while True:
        try:
            _, stderr = proc.communicate(timeout=_POLL_S)
            break
        except subprocess.TimeoutExpired:
            _log(f"  still building {component.module} ({time.monotonic() - started:.0f} s)")
    if proc.returncode != 0:
        raise UserError(f"building {component.module} failed:\n{stderr.strip()}")
    elapsed = round(time.monotonic() - started, 1)
    _log(f"  {component.module} done in {elapsed} s")
    return elapsed


def _go_env(go: str) -> dict[str, str]:
    # A toolchain other than the local one is fetched from the module proxy by the go command itself.
    return {**os.environ, "GOTOOLCHAIN": "local" if go == go_version() else go, "GOFLAGS": "-mod=readonly"}


def _copy_assets(component: Component, out: Path) -> None:
    if not component.assets:
        return
    try:
        directory = subprocess.run(
            ["go", "list", "-m", "-f", "{{.Dir}}", component.dependency],
            cwd=MODULES_DIR / component.module, env=_go_env(toolchain(component)),
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except subprocess.CalledProcessError as err:
        raise UserError(f"cannot locate {component.dependency}'s module: {err.stderr.strip()}") from None
    out.mkdir(parents=True, exist_ok=True)
    for pattern in component.assets:
        found = sorted(glob.glob(str(Path(directory) / pattern)))
        if not found:
            raise UserError(f"{component.dependency} {pinned_version(component)} has no {pattern}")
        for path in found:
            shutil.copyfile(path, out / Path(path).name)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path} not found; the testbed builds from a drlsched clone's testbed/ modules") from None


def _log(message: str) -> None:
    print(f"drlsched: {message}", file=sys.stderr, flush=True)
