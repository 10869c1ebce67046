package devstack

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

// The local Fleet Management server: the fleet controllers sync config/samples to it.
const (
	FleetUser     = "dev-stack"
	FleetPassword = "dev-token"
	// FleetSecretNamespace/FleetSecretName is the credentials Secret CreateSecret writes, for the manager's
	// --fleet-credentials-secret.
	FleetSecretNamespace = "fleet-system"
	FleetSecretName      = "fleet-credentials"
)

// Fleet is a running local Fleet server and where its CA was written, plus the file-backed HTTP source the dev
// ExternalAttributeSync reads.
type Fleet struct {
	Server    *fleetserver.Server
	CAFile    string
	source    *http.Server
	SourceURL string
}

// StartFleet serves the local Fleet Management API on addr over TLS, with a registered collector matching the
// Collector sample, writes its CA to dir/fleet-ca.crt and serves dir/attribute-source on sourceAddr.
func StartFleet(dir, addr, sourceAddr string) (*Fleet, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("local Fleet server: %w", err)
	}
	s := fleetserver.New(FleetUser, FleetPassword)
	s.StartOn(l)
	s.PutCollector(&collectorv1.Collector{
		Id: "edge-collector-1", Name: "edge-collector-1", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY,
		LocalAttributes: map[string]string{"os": "linux", "env": "dev"},
	})
	caFile := filepath.Join(dir, "fleet-ca.crt")
	if err := os.MkdirAll(filepath.Dir(caFile), 0o700); err != nil {
		s.Close()
		return nil, err
	}
	if err := os.WriteFile(caFile, s.CAPEM(), 0o600); err != nil {
		s.Close()
		return nil, err
	}
	f := &Fleet{Server: s, CAFile: caFile}
	if err := f.startSource(filepath.Join(dir, "attribute-source"), sourceAddr); err != nil {
		s.Close()
		return nil, err
	}
	return f, nil
}

// startSource serves dir over plain HTTP on addr, writing a collectors.json there on first use; edit the file and
// touch the dev sync to see the change reach Fleet.
func (f *Fleet) startSource(dir, addr string) error {
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
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("local attribute source: %w", err)
	}
	f.source = &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.source.Serve(l) }()
	f.SourceURL = "http://" + l.Addr().String() + "/collectors.json"
	return nil
}

// Close stops the server and the attribute source.
func (f *Fleet) Close() {
	f.Server.Close()
	_ = f.source.Close()
}

// ApplyDevSync creates the ExternalAttributeSync reading the local file (config/samples holds one with a public URL
// instead, which is what a real cluster uses).
func (f *Fleet) ApplyDevSync(ctx context.Context, c client.Client) error {
	return client.IgnoreAlreadyExists(c.Create(ctx, &fleetv1alpha1.ExternalAttributeSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dev-file-source"},
		Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
			Source:   fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindHTTP, HTTP: &fleetv1alpha1.HTTPSource{URL: f.SourceURL, RecordsPath: "items"}},
			Schedule: "1m",
			Selector: fleetv1alpha1.PolicySelector{CollectorIDs: []string{"edge-collector-1"}},
			Mapping: fleetv1alpha1.AttributeMapping{CollectorIDField: "id",
				AttributeFields: map[string]string{"rack": "location.rack", "datacenter": "location.dc"}},
		},
	}))
}

// ManagerOptions points an in-process manager at the credentials Secret; --fleet-api-url is set too, as a
// deployment pointing at a non-default endpoint would.
func (f *Fleet) ManagerOptions(o *manager.Options) {
	o.FleetCredentialsSecret = FleetSecretNamespace + "/" + FleetSecretName
	o.FleetAPIURL = f.Server.URL()
	// The dev attribute source listens on loopback, which the SSRF guard blocks everywhere else.
	o.SSRFAllowForTesting = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
}

// CreateSecret stores the credentials Secret the manager reads at FleetSecretNamespace/FleetSecretName.
func (f *Fleet) CreateSecret(ctx context.Context, c client.Client) error {
	return f.CreateSecretAt(ctx, c, FleetSecretNamespace, FleetSecretName)
}

// CreateSecretAt stores the credentials Secret at namespace/name, creating the namespace if needed.
func (f *Fleet) CreateSecretAt(ctx context.Context, c client.Client, namespace, name string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string][]byte{
			fleetclient.SecretKeyBaseURL:  []byte(f.Server.URL()),
			fleetclient.SecretKeyUsername: []byte(FleetUser),
			fleetclient.SecretKeyPassword: []byte(FleetPassword),
			fleetclient.SecretKeyCA:       f.Server.CAPEM(),
		},
	}))
}
