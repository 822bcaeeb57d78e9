"""Placement policies by name: kube-scheduler's default, heuristics, and (later) learned policies."""

from __future__ import annotations

from collections.abc import Callable

from drlsched.errors import UserError
from drlsched.fragmentation import TypicalPods
from drlsched.policies.base import Decision, Migration, Option, PodContext, Policy, ScoringPolicy
from drlsched.policies.fgd import FGD, FGDPaper
from drlsched.policies.fgd_lookahead import FGDLookahead
from drlsched.policies.gpu_packing import BestFit, DotProduct, GpuClustering, GpuPacking
from drlsched.policies.heuristics import DataLocal, FirstFit, MostAllocated, RandomFit, Tetris, Trimaran
from drlsched.policies.k8s_default import K8sDefault

BASELINES: dict[str, Callable[[], Policy]] = {
    "k8s-default": K8sDefault,
    "k8s-default-1.32": lambda: K8sDefault(minor=32),
    "most-allocated": MostAllocated,
    "tetris": Tetris,
    "fgd": FGD,
    "fgd-paper": FGDPaper,
    "fgd-lookahead": FGDLookahead,
    "trimaran": Trimaran,
    "first-fit": FirstFit,
    "random": RandomFit,
    "data-local": DataLocal,
    "best-fit": BestFit,
    "dot-product": DotProduct,
    "gpu-clustering": GpuClustering,
    "gpu-packing": GpuPacking,
}


def make_policy(name: str) -> Policy:
    """A fresh policy object for a name such as `k8s-default` or `fgd`, a trained `ppo:PATH` / `dqn:PATH`, or a
    learned packer `packer:PATH`."""
    if name.startswith(("ppo:", "dqn:")):
        from drlsched.rl.policy import load_learned  # lazily: baselines never import torch

        return load_learned(name)
    if name.startswith("packer:"):  # the learned GPU packer (issue 26; docs/learning.md)
        from drlsched.rl.packer_policy import load_packer

        return load_packer(name)
    factory = BASELINES.get(name)
    if factory is None:
        known = ", ".join(BASELINES)
        raise UserError(f"unknown policy {name!r}; known policies: {known}")
    return factory()


__all__ = ["BASELINES", "Decision", "Migration", "Option", "PodContext", "Policy", "ScoringPolicy",
           "TypicalPods", "make_policy"]
