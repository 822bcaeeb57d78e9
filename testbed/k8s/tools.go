//go:build tools

// Package tools pins the main packages this module builds, so that `go mod tidy` keeps their requirements.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
