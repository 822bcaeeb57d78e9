//go:build tools

// Package tools pins the main package this module builds, so that `go mod tidy` keeps its requirements.
package tools

import _ "sigs.k8s.io/karpenter/kwok"
