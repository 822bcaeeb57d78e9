"""The scheduling cycle shared by the simulator and Kubernetes (the second scheduler, the extender): the queue,
the pod context and the policy's decision, and the job book (DAG gate, data locality)."""
