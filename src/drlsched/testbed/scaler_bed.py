"""The testbed a scaler replay (`drlsched.autoscale.replay`) runs on: metrics-server, the real
kube-controller-manager with the HPA's sync divided by the replay's speed-up, and nodes of the simulator's
template: `--nodes` static ones, or with `--node-autoscaler karpenter` one static node (the service stays off it:
it selects the pool) and a NodePool `POOL` of the template, at most `--nodes` nodes, whose nodes register after
the simulator's provisioning delay / speed-up, so they are ready as late in workload time as the simulator's."""

from __future__ import annotations

from pathlib import Path

from drlsched.autoscale.node_groups import NodeGroup
from drlsched.autoscale.replay import Plan
from drlsched.testbed.controlplane import Options

POOL = "pool-replay"


def scaler_bed(state_dir: Path, plan: Plan) -> Options:
    template, nodes = plan.config.template, plan.config.nodes
    common = {"metrics_server": True, "controller_manager": True, "hpa_sync_period_s": float(plan.hpa_period_s)}
    if plan.config.node_autoscaler == "none":
        return Options(state_dir, nodes=nodes, node_specs=[template.node_spec(f"node-{i:02d}") for i in range(nodes)],
                       **common)
    return Options(state_dir, nodes=1, node_specs=[template.node_spec("static-00")], node_autoscaler="karpenter",
                   node_pools=[NodeGroup(POOL, (template,), 0, nodes)],
                   node_provision_s=plan.config.node_provision_s / plan.speedup, **common)
