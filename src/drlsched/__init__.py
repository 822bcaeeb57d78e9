"""drlsched: a deep-reinforcement-learning pod scheduler for Kubernetes and the simulator it learns in."""

__version__ = "0.1.0"
