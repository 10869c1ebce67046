package helm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/helmchart"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// releaseName and releaseNamespace are what the tests install the chart as.
const (
	releaseName      = "quartet"
	releaseNamespace = "quartet-helm"
	// dashboardNamespace is where the non-default values put the Grafana dashboards.
	dashboardNamespace = "monitoring"
)

func chartDir() string { return filepath.Join(testenv.RepoRoot(), helmchart.ChartDir) }

func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	c, err := loader.Load(chartDir())
	if err != nil {
		t.Fatalf("loading %s: %v", chartDir(), err)
	}
	return c
}

// render is `helm template`: the chart's templates (not its CRDs) for vals, as objects.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return renderOn(t, vals, "cert-manager.io/v1", "monitoring.coreos.com/v1")
}

// renderOn renders for a cluster serving apiVersions beside Kubernetes' own.
func renderOn(t *testing.T, vals map[string]any, apiVersions ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmchart.Template(chartDir(), helmchart.TemplateOptions{ReleaseName: releaseName, Namespace: releaseNamespace,
		KubeVersion: "v" + testenv.KubernetesVersion, APIVersions: apiVersions}, vals)
}

// chartCRDs are the chart's crds/ files as objects.
func chartCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var crds []*unstructured.Unstructured
	for _, f := range loadChart(t).CRDObjects() {
		obj := map[string]any{}
		if err := yaml.Unmarshal(f.File.Data, &obj); err != nil {
			t.Fatalf("%s: %v", f.Filename, err)
		}
		crds = append(crds, &unstructured.Unstructured{Object: obj})
	}
	return crds
}

// nonDefaultValues changes every value the chart has from its default.
func nonDefaultValues(t *testing.T) map[string]any {
	return map[string]any{
		"image":            map[string]any{"repository": "registry.example.com/quartet/operator", "tag": "v9.9.9", "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "registry-credentials"}},
		"replicaCount":     2,
		"leaderElection":   map[string]any{"enabled": false},
		"groups":           []any{"gnmic", "fleet"},
		"config": map[string]any{
			"log-level":                "debug",
			"kube-api-burst":           50,
			"enable-http2":             true,
			"fleet-credentials-secret": "fleet-credentials",
			"gnmic-poll-interval":      "45s",
		},
		"extraEnv": []any{map[string]any{"name": "OTEL_SERVICE_NAME", "value": "quartet"}},
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "50m", "memory": "128Mi"},
			"limits":   map[string]any{"cpu": "1", "memory": "512Mi"},
		},
		"podSecurityContext": map[string]any{"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}},
			"runAsNonRoot": true,
		},
		"podAnnotations":    map[string]any{"example.com/team": "telemetry"},
		"podLabels":         map[string]any{"example.com/tier": "operators"},
		"nodeSelector":      map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "operators", "effect": "NoSchedule"}},
		"affinity":          map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64", "arm64"}}}}}}}},
		"priorityClassName": "system-cluster-critical",
		"webhook": map[string]any{"certificates": map[string]any{
			"source":     "secret",
			"secretName": "quartet-webhook-tls",
			"caBundle":   base64.StdEncoding.EncodeToString(selfSignedCA(t)),
		}},
		"networkPolicy": map[string]any{"enabled": true},
		"monitoring": map[string]any{
			"serviceMonitor":    map[string]any{"enabled": true},
			"prometheusRules":   map[string]any{"enabled": true},
			"grafanaDashboards": map[string]any{"enabled": true, "namespace": dashboardNamespace},
		},
	}
}

// clusterIssuerValues is the cert-manager source with an Issuer of the user's instead of the chart's own.
func clusterIssuerValues() map[string]any {
	return map[string]any{"webhook": map[string]any{"certificates": map[string]any{
		"source":      "cert-manager",
		"certManager": map[string]any{"issuerRef": map[string]any{"name": "corporate-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}},
	}}}
}

// selfSignedCA is a PEM CA certificate for the caBundle value.
func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quartet-helm-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// find returns the rendered object of kind and name, or nil.
func find(objects []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
