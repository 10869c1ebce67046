package main

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/manager"
)

// devRegistry runs the agentrax MCP registry on a fixed loopback port. No pod runs in `make dev`, so every
// agent's service host maps to loopback with its own port: an MCP server started locally on spec.port is
// what the registry discovers.
type devRegistry struct{ token string }

const devRegistryAddr = "127.0.0.1:9090"

func newDevRegistry() *devRegistry { return &devRegistry{token: rand.Text()} }

func (d *devRegistry) managerOptions(o *manager.Options) {
	o.RegistryBindAddress = devRegistryAddr
	o.RegistryHostMap = "*=127.0.0.1"
	o.RegistryTokenSecret = "default/agentrax-registry-token"
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
`, devRegistryAddr, d.token)
}
