"""Job-level scheduling: Spark-like jobs (DAGs of stages of tasks) run by executors on a cluster.

model.py (jobs, stages, executors), profiles.py (the tpch profile format), bandwidth.py (the shared I/O slowdown
model calibrated on the profiles), engine.py (the event loop), policies.py (`JobPolicy` and its baselines),
metrics.py, workload.py (the `tpch` scenario and `spark-profiles` traces). docs/simulator.md "Jobs, stages and
executors".
"""
