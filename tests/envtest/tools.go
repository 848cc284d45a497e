//go:build tools

// Package envtest only pins the Kubernetes binaries the test tiers run: `go build` of these
// main packages is what build.sh (kube-apiserver, kubectl) and build-node.sh (the node's
// kubelet, controller-manager, scheduler and kube-proxy) do, all from one k8s.io/kubernetes.
package envtest

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
