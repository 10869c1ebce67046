// Command coredns is the real test node's cluster DNS: CoreDNS built from its Go modules with only the plugins
// the node's Corefile uses (internal/testenv/realnode), in the order they run. It answers for the cluster domain
// from the API server's Services and EndpointSlices and forwards nothing: there is no forward plugin, so a name
// outside the zones it serves is refused, never looked up off the machine.
package main

import (
	"log"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
)

// directives are the plugins this build has, in the order a query passes them (that of CoreDNS's own plugin.cfg):
// where to listen, error and query logs, shuffled A records, the cache, then the answer from the cluster.
var directives = []string{"bind", "errors", "log", "loadbalance", "cache", "kubernetes"}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		log.Fatal(err)
	}
	coremain.Run()
}
