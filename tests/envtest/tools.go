//go:build tools

// Package envtest only pins the Kubernetes binaries the kube test tier runs:
// `go build` of these two main packages is what build.sh does.
package envtest

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
