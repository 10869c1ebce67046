// Package asinstalled runs the real manager binary the way an installer set it up — OLM from the bundle, Helm from
// the chart — on the cluster-grade control plane: with a TokenRequest token of the ServiceAccount the installer
// created (nothing more), the serving certificate from the installer's Secret, the Deployment's arguments and
// environment (only listen addresses and the certificate directory changed for a local process) and the webhook
// Service routed to it. It applies the samples, waits for their steady state with the devstack peers, and checks
// the API server's audit log for forbidden answers to that ServiceAccount.
package asinstalled

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/guard"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
	"github.com/quartet-dev/quartet-operator/internal/testenv/escalation"
)

// Install names what the installer created.
type Install struct {
	// Namespace the operator is installed in.
	Namespace string
	// Deployment of the manager; its container "manager" gives the arguments and environment.
	Deployment string
	// ServiceAccount the manager runs as.
	ServiceAccount string
	// WebhookService is the Service the webhook configurations call, on port 443.
	WebhookService string
	// CertSecret is the kubernetes.io/tls Secret with the webhook serving certificate. When the Deployment passes
	// --webhook-cert-secret the manager keeps that Secret and writes its certificate directory itself, so it is
	// not copied.
	CertSecret string
	// Inventory names the devstack TargetSource inventory (e.g. "olm-test").
	Inventory string
}

// User is the user name the API server gives the manager's ServiceAccount, for an audit policy.
func (in Install) User() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", in.Namespace, in.ServiceAccount)
}

// Manager is the manager binary running as installed, beside the local peers the samples talk to.
type Manager struct {
	in      Install
	env     *testenv.Env
	dir     string
	binary  string
	devDial string
	// Prometheus stands in for the Prometheus QUARTET_PROMETHEUS_URL names, when the Deployment sets it.
	Prometheus *PrometheusTap
	// Process is the running manager.
	Process *testenv.Process
	// metricsAddr is where the running manager serves /metrics (its --metrics-bind-address, made local).
	metricsAddr string
	// apiAddr is where the running manager serves the TargetSource refresh API (its --api-bind-address, made
	// local).
	apiAddr string
	// registryAddr is where it serves the MCP registry (its --registry-bind-address, made local).
	registryAddr string
}

// Run starts the manager as installed (Start), applies the samples, waits for their steady state and checks the
// audit log shows requests of the ServiceAccount and no forbidden answer.
func Run(t *testing.T, env *testenv.Env, in Install) *Manager {
	t.Helper()
	m := Start(t, env, in)
	m.ApplySamples(t)
	m.WaitConverged(t)
	m.AssertNothingForbidden(t)
	m.TryEscalations(t)
	return m
}

// TryEscalations tries every escalation of package escalation as the installed ServiceAccount, with a token of
// its own, once the manager has installed its guard: each must be refused (RBAC or the guard).
func (m *Manager) TryEscalations(t *testing.T) {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	op, err := escalation.AsServiceAccount(ctx, m.env.Config, m.env.Client, m.in.Namespace, m.in.ServiceAccount)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	scratch := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "escalation-"}}
	g.Expect(m.env.Client.Create(ctx, scratch)).To(gomega.Succeed())
	defer func() { g.Expect(m.env.Client.Delete(ctx, scratch)).To(gomega.Succeed()) }()
	g.Eventually(func() error { return guard.Enforced(ctx, op, m.in.Namespace) }).WithTimeout(time.Minute).
		Should(gomega.Succeed(), "the manager installed its escalation guard")
	escalation.Refused(t, op, escalation.Attempts(m.in.Namespace, m.in.ServiceAccount, scratch.Name))
}

// Start starts the peers the Deployment's environment names — a local Fleet API behind the credentials Secret
// (QUARTET_FLEET_CREDENTIALS_SECRET, namespace/name, which Start creates), gNMIc collector stand-ins behind the
// sample Cluster's simulated pods, the sample TargetSource's inventory and, when QUARTET_PROMETHEUS_URL is set, a
// real Prometheus behind a recording proxy — builds the manager binary and runs it as the Deployment says. The env's
// cluster needs an audit policy recording in.User() (testenv.ClusterOptions.AuditPolicy).
func Start(t *testing.T, env *testenv.Env, in Install) *Manager {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	m := &Manager{in: in, env: env, dir: t.TempDir()}

	container, err := managerContainer(ctx, env, in)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	processEnv, _ := commandLine(container, in.Namespace)
	fleet, err := devstack.StartFleet(m.dir, "127.0.0.1:0", "127.0.0.1:0")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(fleet.Close)
	secretRef := envValue(processEnv, "QUARTET_FLEET_CREDENTIALS_SECRET")
	ns, name, ok := strings.Cut(secretRef, "/")
	g.Expect(ok).To(gomega.BeTrue(), "QUARTET_FLEET_CREDENTIALS_SECRET=%q is namespace/name", secretRef)
	g.Expect(fleet.CreateSecretAt(ctx, env.Client, ns, name)).To(gomega.Succeed())
	collectors, err := devstack.StartCollectors(3)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(collectors.Close)
	// The sample Cluster's API is mutual TLS: the stand-ins serve the certificate the operator issues.
	followCtx, stopFollowing := context.WithCancel(ctx)
	t.Cleanup(stopFollowing)
	collectors.Follow(followCtx, env.Client)
	g.Expect(devstack.ApplyInventory(ctx, env.Client, in.Inventory)).To(gomega.Succeed())
	// Development-only (docs/development.md): no container runs in the simulated collector pods and no Prometheus
	// in the cluster, so the manager's connections to their addresses go to the local stand-ins.
	m.devDial = collectors.DialEntries()
	if promURL := envValue(processEnv, "QUARTET_PROMETHEUS_URL"); promURL != "" {
		u, err := url.Parse(promURL)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(u.Port()).NotTo(gomega.BeEmpty(), "QUARTET_PROMETHEUS_URL names its port")
		m.Prometheus = StartPrometheusTap(t)
		m.devDial += "," + u.Host + "=" + m.Prometheus.Addr()
	}

	m.binary = filepath.Join(m.dir, "manager")
	build := exec.Command("go", "build", "-o", m.binary, "./cmd")
	build.Dir = testenv.RepoRoot()
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), "go build ./cmd: %s", out)
	m.start(t, "manager")
	// Whatever step fails, name the forbidden requests: a missing permission is the likeliest cause.
	t.Cleanup(func() {
		if _, forbidden, err := AuditedAnswers(env.Cluster.AuditLogPath(), in.User()); t.Failed() && err == nil && len(forbidden) > 0 {
			t.Logf("requests of %s answered 403 Forbidden: %v", in.User(), forbidden)
		}
	})
	return m
}

// Restart stops the running manager and starts it again as the Deployment says now (after an upgrade, say), with
// a fresh token and the certificate the Secret holds now; name names its log.
func (m *Manager) Restart(t *testing.T, name string) {
	t.Helper()
	gomega.NewWithT(t).Expect(m.Process.Stop()).To(gomega.Succeed())
	m.start(t, name)
}

// start runs the manager as the Deployment says: its arguments (listen addresses and certificate directory made
// local) and environment, a fresh ServiceAccount token and the serving certificate of the Secret.
func (m *Manager) start(t *testing.T, name string) {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	container, err := managerContainer(ctx, m.env, m.in)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	processEnv, args := commandLine(container, m.in.Namespace)
	dir := filepath.Join(m.dir, "run-"+name)
	g.Expect(os.MkdirAll(dir, 0o700)).To(gomega.Succeed())
	// The manager's identity: a token of the ServiceAccount the installer created, nothing more.
	kubeconfig := filepath.Join(dir, "manager.kubeconfig")
	g.Expect(writeServiceAccountKubeconfig(ctx, m.env, m.in, kubeconfig)).To(gomega.Succeed())
	// The installer's serving certificate, where the manager reads it; the API server reaches the webhook Service
	// through the harness's Service routing.
	certDir := filepath.Join(dir, "serving-certs")
	if !managesItsCertificate(args, processEnv) {
		g.Expect(writeServingCert(ctx, m.env, m.in, certDir)).To(gomega.Succeed())
	}
	// The mounted metrics certificate's directory: one of this run, empty like the pod's optional service-CA volume
	// on a cluster without OpenShift, so the manager issues its own (--metrics-cert-secret) as it would there.
	args = overrideArgs(args, map[string]string{"metrics-cert-dir": filepath.Join(dir, "metrics-certs")})
	ports := make([]int, 5)
	for i := range ports {
		ports[i], err = FreePort()
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}
	m.env.Cluster.Router.Route(testenv.ServicePort{Namespace: m.in.Namespace, Name: m.in.WebhookService, Port: 443},
		fmt.Sprintf("127.0.0.1:%d", ports[0]))
	m.apiAddr = fmt.Sprintf("127.0.0.1:%d", ports[4])
	m.registryAddr = fmt.Sprintf("127.0.0.1:%d", ports[3])
	overrides := map[string]string{
		"webhook-port":              strconv.Itoa(ports[0]),
		"webhook-cert-dir":          certDir,
		"metrics-bind-address":      fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"health-probe-bind-address": fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"registry-bind-address":     m.registryAddr,
		"api-bind-address":          m.apiAddr,
		// In a pod, controller-runtime reads the namespace from the mounted ServiceAccount; a local process is told.
		"leader-election-namespace": m.in.Namespace,
	}
	// The registry's certificate directory, when the Deployment names one: a path of this run, not the pod's /tmp.
	if _, err := flagValue(args, "registry-tls-cert-dir"); err == nil {
		overrides["registry-tls-cert-dir"] = filepath.Join(dir, "registry-certs")
	}
	args = overrideArgs(args, overrides)
	processEnv = append(processEnv, "KUBECONFIG="+kubeconfig, "QUARTET_DEV_DIAL_MAP="+m.devDial)
	m.Process, err = m.env.Cluster.Run(name, processEnv, m.binary, args...)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	proc := m.Process
	t.Cleanup(func() { _ = proc.Stop() })
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			m.metricsAddr = v
		}
	}
}

// MetricsAddr is where the running manager serves its metrics (host:port on loopback).
func (m *Manager) MetricsAddr() string { return m.metricsAddr }

// ApplySamples applies config/samples, retrying while the webhooks are not served yet.
func (m *Manager) ApplySamples(t *testing.T) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(m.Process.Exited()).To(gomega.Succeed())
		_, err := testenv.ApplySamples(context.Background(), m.env.Client, filepath.Join(testenv.RepoRoot(), "config", "samples"),
			"default", m.in.Inventory)
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(gomega.Succeed())
}

// WaitConverged waits for every sample's steady state.
func (m *Manager) WaitConverged(t *testing.T) {
	t.Helper()
	g := gomega.NewWithT(t)
	missing := devstack.WaitConverged(context.Background(), m.env.Client, 4*time.Minute, func(what string, after time.Duration) {
		t.Logf("steady: %s after %s", what, after.Round(100*time.Millisecond))
	})
	g.Expect(m.Process.Exited()).To(gomega.Succeed())
	g.Expect(missing).To(gomega.BeEmpty(), "samples not in their steady state (manager log: %s)", m.Process.LogFile())
}

// AssertNothingForbidden reads the audit log: the ServiceAccount made requests and none was answered 403.
func (m *Manager) AssertNothingForbidden(t *testing.T) {
	t.Helper()
	g := gomega.NewWithT(t)
	requests, forbidden, err := AuditedAnswers(m.env.Cluster.AuditLogPath(), m.in.User())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(requests).To(gomega.BeNumerically(">", 100), "the audit log records the manager's requests")
	g.Expect(forbidden).To(gomega.BeEmpty(), "requests of %s answered 403 Forbidden", m.in.User())
	t.Logf("%d requests of the manager audited, none forbidden", requests)
}

// ManagerContainer is the Deployment's container named manager, or nil.
func ManagerContainer(dep *appsv1.Deployment) *corev1.Container {
	for i := range dep.Spec.Template.Spec.Containers {
		if c := &dep.Spec.Template.Spec.Containers[i]; c.Name == "manager" {
			return c
		}
	}
	return nil
}

func managerContainer(ctx context.Context, env *testenv.Env, in Install) (*corev1.Container, error) {
	dep := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.Deployment}, dep); err != nil {
		return nil, err
	}
	c := ManagerContainer(dep)
	if c == nil {
		return nil, fmt.Errorf("deployment %s has no manager container", in.Deployment)
	}
	return c, nil
}

// commandLine is the container's environment (values, and the Downward API's namespace) and arguments.
func commandLine(c *corev1.Container, namespace string) ([]string, []string) {
	var envs []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			envs = append(envs, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			envs = append(envs, e.Name+"="+namespace)
		}
	}
	return envs, append([]string(nil), c.Args...)
}

// managesItsCertificate reports whether the manager generates its webhook certificate (--webhook-cert-secret).
func managesItsCertificate(args, envs []string) bool {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--webhook-cert-secret="); ok && v != "" {
			return true
		}
	}
	return envValue(envs, "QUARTET_WEBHOOK_CERT_SECRET") != ""
}

func envValue(envs []string, name string) string {
	for _, e := range envs {
		if k, v, _ := strings.Cut(e, "="); k == name {
			return v
		}
	}
	return ""
}

// overrideArgs replaces (or adds) --name=value flags: the listeners and certificate directory of a local process.
func overrideArgs(args []string, values map[string]string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, replaced := values[name]; !replaced {
			out = append(out, a)
		}
	}
	for name, v := range values {
		out = append(out, "--"+name+"="+v)
	}
	return out
}

// writeServiceAccountKubeconfig asks the API server for a token of the manager's ServiceAccount (TokenRequest) and
// writes a kubeconfig that uses only that token.
func writeServiceAccountKubeconfig(ctx context.Context, env *testenv.Env, in Install, path string) error {
	sa := &corev1.ServiceAccount{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.ServiceAccount}, sa); err != nil {
		return err
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := env.Client.SubResource("token").Create(ctx, sa, req); err != nil {
		return fmt.Errorf("TokenRequest for %s: %w", in.ServiceAccount, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: req.Status.Token}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "manager"}
	cfg.CurrentContext = "manager"
	return clientcmd.WriteToFile(*cfg, path)
}

// writeServingCert copies the installer's certificate Secret into dir, as its volume mount would.
func writeServingCert(ctx context.Context, env *testenv.Env, in Install, dir string) error {
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: in.CertSecret}, secret); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if err := os.WriteFile(filepath.Join(dir, key), secret.Data[key], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// FreePort returns a loopback port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
