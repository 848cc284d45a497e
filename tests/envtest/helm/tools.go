//go:build tools

// Package helm only pins the helm CLI the kube test tier renders the chart with:
// `go build` of this main package is what ../build-helm.sh does. It is a module of its own
// so helm's k8s.io dependencies are not forced to the versions ../go.mod pins.
package helm

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
