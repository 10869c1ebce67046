package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/devdial"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
)

// devRegistry runs the agentrax MCP registry on a loopback address (127.0.0.1:9090 unless
// QUARTET_DEV_REGISTRY_ADDR says otherwise). No pod runs in `make dev`, so the connections to every agent's Service
// go to loopback on the same port (devAgentDialEntries): an MCP server started locally on spec.port is what the
// registry discovers, under the agent's in-cluster URL.
type devRegistry struct{ addr, token string }

// devAgentDialEntries send every <service>.<namespace>.svc:<port> to 127.0.0.1:<port> (QUARTET_DEV_DIAL_MAP).
const devAgentDialEntries = "*.svc:*=127.0.0.1"

// newDevRegistry serves the registry on addr; port 0 is resolved to a free port first, so that the hints printed
// (help) name the address the manager really listens on (the port is free when chosen; another process could take
// it before the manager binds it, which a development stack can live with).
func newDevRegistry(addr string) *devRegistry {
	if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
			addr = ln.Addr().String()
			_ = ln.Close()
		}
	}
	return &devRegistry{addr: addr, token: rand.Text()}
}

func (d *devRegistry) managerOptions(o *manager.Options) {
	o.RegistryBindAddress = d.addr
	o.RegistryTokenSecret = "default/agentrax-registry-token"
	// make dev serves the registry on loopback without a certificate; its printed curl commands write over HTTP.
	o.RegistryPlaintextWrites = true
}

// createSecret stores the write token where --registry-token-secret points.
func (d *devRegistry) createSecret(ctx context.Context, c client.Client) error {
	return client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agentrax-registry-token"},
		StringData: map[string]string{"token": d.token},
	}))
}

func (d *devRegistry) help() string {
	return fmt.Sprintf(`The agentrax MCP registry listens on http://%[1]s (an exposed agent's MCP server is looked for on
127.0.0.1:<spec.port>; write token in Secret default/agentrax-registry-token):

  curl -s http://%[1]s/agents
  curl -s 'http://%[1]s/v0.1/servers?limit=10'
  curl -s -X POST http://%[1]s/agents -H 'Authorization: Bearer %[2]s' \
    -d '{"namespace":"default","name":"demo","endpoint":"http://127.0.0.1:8080/mcp","tools":["search"]}'
`, d.addr, d.token)
}

// devDialMap is the one map of in-cluster peer addresses to local processes the manager of `make dev` dials
// through: the sample Cluster's collector pods, then every agent Service on loopback.
func devDialMap(collectors *devstack.Collectors) (*devdial.Map, error) {
	m := &devdial.Map{}
	for _, entries := range []string{collectors.DialEntries(), devAgentDialEntries} {
		if err := m.Add(entries); err != nil {
			return nil, err
		}
	}
	return m, nil
}
