package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/manager"
)

// The local Fleet Management server of `make dev`: the fleet controllers sync config/samples to it.
const (
	devFleetUser     = "dev-stack"
	devFleetPassword = "dev-token"
	devFleetSecretNS = "fleet-system"
	devFleetSecret   = "fleet-credentials"
)

// devFleet is a running local Fleet server and where its CA was written.
type devFleet struct {
	server *fleetserver.Server
	caFile string
}

// startDevFleet serves the local Fleet Management API on FLEET_DEV_ADDR (default 127.0.0.1:8444) over TLS, with a
// registered collector matching the Collector sample, and writes its CA to .dev/fleet-ca.crt.
func startDevFleet(root string) (*devFleet, error) {
	l, err := net.Listen("tcp", envOr("FLEET_DEV_ADDR", "127.0.0.1:8444"))
	if err != nil {
		return nil, fmt.Errorf("local Fleet server: %w", err)
	}
	s := fleetserver.New(devFleetUser, devFleetPassword)
	s.StartOn(l)
	s.PutCollector(&collectorv1.Collector{
		Id: "edge-collector-1", Name: "edge-collector-1", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY,
		LocalAttributes: map[string]string{"os": "linux", "env": "dev"},
	})
	caFile := filepath.Join(root, ".dev", "fleet-ca.crt")
	if err := os.MkdirAll(filepath.Dir(caFile), 0o700); err != nil {
		s.Close()
		return nil, err
	}
	if err := os.WriteFile(caFile, s.CAPEM(), 0o600); err != nil {
		s.Close()
		return nil, err
	}
	return &devFleet{server: s, caFile: caFile}, nil
}

// managerOptions points the manager at the credentials Secret; --fleet-api-url is set too, as a deployment
// pointing at a non-default endpoint would.
func (f *devFleet) managerOptions(o *manager.Options) {
	o.FleetCredentialsSecret = devFleetSecretNS + "/" + devFleetSecret
	o.FleetAPIURL = f.server.URL()
}

// createSecret stores the credentials Secret the manager reads.
func (f *devFleet) createSecret(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devFleetSecretNS}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: devFleetSecretNS, Name: devFleetSecret},
		Data: map[string][]byte{
			fleetclient.SecretKeyBaseURL:  []byte(f.server.URL()),
			fleetclient.SecretKeyUsername: []byte(devFleetUser),
			fleetclient.SecretKeyPassword: []byte(devFleetPassword),
			fleetclient.SecretKeyCA:       f.server.CAPEM(),
		},
	}))
}

func (f *devFleet) help() string {
	return fmt.Sprintf(`The fleet samples sync to a local Fleet Management API at %s (user %s, password %s):

  bin/k8s/kubectl get pipelines,collectors -A
  curl --cacert %s -u %s:%s -H 'Content-Type: application/json' -d '{}' \
    %s/pipeline.v1.PipelineService/ListPipelines
`, f.server.URL(), devFleetUser, devFleetPassword, f.caFile, devFleetUser, devFleetPassword, f.server.URL())
}
