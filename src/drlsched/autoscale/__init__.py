"""Autoscalers as pure decision logic with time passed in: Kubernetes' HPA (`hpa`, `replicas`, with
metrics-server's sampling in `metrics_server`), node autoscalers (`cluster_autoscaler`, `karpenter` over the node
groups of `node_groups`), the load they react to (`load`) and a predictive replica recommender (`predictive`).

Nothing here keeps a clock or touches the API: callers (the simulator's services, the testbed, a controller) pass
`now` and the observed state, and apply the decisions returned. docs/autoscaling.md describes each.
"""
