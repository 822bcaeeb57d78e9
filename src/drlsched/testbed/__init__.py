"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, KWOK) for tests and demos."""
