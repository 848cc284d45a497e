// cert-manager's controller, for the three-node tier's issuerRef test (tests/harness/certmanager.py).
// cert-manager's own main (cmd/controller) is a nested Go module the module proxy does not serve,
// so this program does what it does for the part we use: build the controller context from a
// kubeconfig, construct the controllers that issue from a CA Issuer or ClusterIssuer (the
// Certificate controllers, the CertificateRequest approver, the CA issuer and the Issuer and
// ClusterIssuer readiness controllers), start the informers and run them. No leader election
// (one process), no webhook (the harness applies the CRDs without their conversion webhook; the
// API server's schema validation is what checks objects), no ACME, Vault or Venafi.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"

	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager",
		"where a ClusterIssuer's CA Secret lives")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := controllerpkg.ContextOptions{
		Kubeconfig:    *kubeconfig,
		IssuerOptions: controllerpkg.IssuerOptions{ClusterResourceNamespace: *clusterNS},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: 2 * time.Second,
			CertificateRequestMaximumBackoffDuration: 30 * time.Second,
		},
	}
	factory, err := controllerpkg.NewContextFactory(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "context:", err)
		os.Exit(1)
	}
	base, err := factory.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "context:", err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	for name, construct := range controllerpkg.Known() {
		c, err := construct(factory)
		if err != nil {
			fmt.Fprintf(os.Stderr, "controller %s: %v\n", name, err)
			os.Exit(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(2, ctx); err != nil {
				fmt.Fprintf(os.Stderr, "controller %s: %v\n", name, err)
				stop()
			}
		}()
	}
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.SharedInformerFactory.Start(ctx.Done())
	fmt.Fprintln(os.Stderr, "cert-manager controllers running")
	wg.Wait()
}
