"""Fragmentation Gradient Descent (Weng et al., ATC'23): place each pod on the node (and GPU) where the
cluster's expected GPU fragmentation grows least, for the workload's typical pod shapes."""

from __future__ import annotations

import numpy as np

from drlsched.fragmentation import node_fragmentation
from drlsched.policies.base import Decision, PodContext, Policy
from drlsched.workload import GPU_MILLI


class FGD(Policy):
    name = "fgd"

    def select(self, ctx: PodContext) -> Decision | None:
        c = self.cluster
        for option in ctx.options:
            nodes = np.flatnonzero(option.feasible)
            if nodes.size == 0:
                continue
            r = option.request
            if ctx.typical is None or c.total_gpu_milli == 0:
                return Decision(int(nodes[self.rng.integers(nodes.size)]), option.gpus)
            free = c.gpu_free[nodes]
            cpu_left = c.cap_cpu[nodes] - c.req_cpu[nodes]
            bits = c.node_model_bit[nodes]
            before = node_fragmentation(free, cpu_left, bits, ctx.typical)
            after_cpu = cpu_left - r.cpu
            g = free.shape[1]
            if r.gpus and r.gpu_milli < GPU_MILLI:
                # Try the share on every GPU of every node; keep each node's best GPU.
                trial = free[:, None, :] - r.gpu_milli * np.eye(g, dtype=np.int64)[None, :, :]
                valid = free >= r.gpu_milli
                after = node_fragmentation(trial.reshape(-1, g), np.repeat(after_cpu, g), np.repeat(bits, g),
                                           ctx.typical).reshape(-1, g)
                after = np.where(valid, after, np.inf)
                gpu_choice = np.argmin(after, axis=1)
                after_best = after[np.arange(nodes.size), gpu_choice]
            else:
                trial = free.copy()
                if r.gpus:
                    # Whole GPUs: any fully free ones are equivalent; take the first r.gpus of them.
                    full = trial == GPU_MILLI
                    take = full & (np.cumsum(full, axis=1) <= r.gpus)
                    trial[take] = 0
                after_best = node_fragmentation(trial, after_cpu, bits, ctx.typical)
                gpu_choice = None
            delta = after_best - before
            best = np.flatnonzero(delta <= delta.min() + 1e-9)
            i = int(best[0] if best.size == 1 else best[self.rng.integers(best.size)])
            ids = (int(gpu_choice[i]),) if gpu_choice is not None else None
            return Decision(int(nodes[i]), option.gpus, ids)
        return None
