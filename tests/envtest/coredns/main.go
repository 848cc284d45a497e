// CoreDNS with only the plugins the e2e node's cluster DNS needs, so the build stays small:
// the kubernetes plugin answers cluster.local (Services, headless Service endpoints, reverse
// lookups of pod IPs); nothing is forwarded, pod traffic stays on this machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which CoreDNS runs them: the order of its own plugin.cfg.
var directives = []string{"bind", "ready", "errors", "log", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
