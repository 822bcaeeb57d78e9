"""drlsched inside Kubernetes: the scheduler extender, the second scheduler and their cluster state."""
