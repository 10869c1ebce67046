package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
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

// devFleet is a running local Fleet server and where its CA was written, plus the file-backed HTTP source the
// dev ExternalAttributeSync reads.
type devFleet struct {
	server    *fleetserver.Server
	caFile    string
	source    *http.Server
	sourceURL string
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
	f := &devFleet{server: s, caFile: caFile}
	if err := f.startSource(filepath.Join(root, ".dev", "attribute-source")); err != nil {
		s.Close()
		return nil, err
	}
	return f, nil
}

// startSource serves dir over plain HTTP on FLEET_DEV_SOURCE_ADDR (default 127.0.0.1:8445), writing a
// collectors.json there on first use; edit the file and touch the dev sync to see the change reach Fleet.
func (f *devFleet) startSource(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	file := filepath.Join(dir, "collectors.json")
	if _, err := os.Stat(file); os.IsNotExist(err) {
		doc := `{"items": [{"id": "edge-collector-1", "location": {"rack": "r12", "dc": "dev-lab"}}]}` + "\n"
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			return err
		}
	}
	l, err := net.Listen("tcp", envOr("FLEET_DEV_SOURCE_ADDR", "127.0.0.1:8445"))
	if err != nil {
		return fmt.Errorf("local attribute source: %w", err)
	}
	f.source = &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.source.Serve(l) }()
	f.sourceURL = "http://" + l.Addr().String() + "/collectors.json"
	return nil
}

func (f *devFleet) close() {
	f.server.Close()
	_ = f.source.Close()
}

// applyDevSync creates the ExternalAttributeSync reading the local file (config/samples holds one with a
// public URL instead, which is what a real cluster uses).
func (f *devFleet) applyDevSync(ctx context.Context, c client.Client) error {
	return client.IgnoreAlreadyExists(c.Create(ctx, &fleetv1alpha1.ExternalAttributeSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dev-file-source"},
		Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
			Source:   fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindHTTP, HTTP: &fleetv1alpha1.HTTPSource{URL: f.sourceURL, RecordsPath: "items"}},
			Schedule: "1m",
			Selector: fleetv1alpha1.PolicySelector{CollectorIDs: []string{"edge-collector-1"}},
			Mapping: fleetv1alpha1.AttributeMapping{CollectorIDField: "id",
				AttributeFields: map[string]string{"rack": "location.rack", "datacenter": "location.dc"}},
		},
	}))
}

// managerOptions points the manager at the credentials Secret; --fleet-api-url is set too, as a deployment
// pointing at a non-default endpoint would.
func (f *devFleet) managerOptions(o *manager.Options) {
	o.FleetCredentialsSecret = devFleetSecretNS + "/" + devFleetSecret
	o.FleetAPIURL = f.server.URL()
	// The dev attribute source listens on loopback, which the SSRF guard blocks everywhere else.
	o.SSRFAllowForTesting = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
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

  bin/k8s/kubectl get pipelines,collectors,remoteattributepolicies,externalattributesyncs -A
  curl --cacert %s -u %s:%s -H 'Content-Type: application/json' -d '{}' \
    %s/pipeline.v1.PipelineService/ListPipelines
  curl --cacert %s -u %s:%s -H 'Content-Type: application/json' -d '{"id":"edge-collector-1"}' \
    %s/collector.v1.CollectorService/GetCollector

The ExternalAttributeSync default/dev-file-source reads %s (the file is .dev/attribute-source/collectors.json);
the RemoteAttributePolicy sample adds tier=gold to the same collector.
`, f.server.URL(), devFleetUser, devFleetPassword, f.caFile, devFleetUser, devFleetPassword, f.server.URL(),
		f.caFile, devFleetUser, devFleetPassword, f.server.URL(), f.sourceURL)
}
