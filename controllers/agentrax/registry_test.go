package agentrax_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp/mcptest"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry/cmstore"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	agentraxwebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/agentrax"
)

// The test managers run the real registry: the 30 s minimum TTL, heartbeats every 300 ms, a sweep every
// 500 ms, every agent's service host reached on loopback through QUARTET_DEV_DIAL_MAP (set in TestMain; an
// agent's spec.port is its MCP server's port), writes with the token of a Secret, and leader election so that a second manager is a follower.
const (
	testTTL            = registry.MinTTL
	testHealthInterval = 300 * time.Millisecond
	tokenSecret        = "agentrax-registry-token"
	writeToken         = "registry-test-token"
)

// leaderURL is the registry API of the package's manager (it changes when the manager restarts).
var leaderURL atomic.Value

func registryOptions(url *atomic.Value) func(*manager.Options) {
	return func(o *manager.Options) {
		// The registry API serves HTTPS, as installs do: writes and their tokens are refused over plain HTTP.
		o.RegistryTLSCertDir = registryTLS().dir
		o.RegistryTTL = testTTL
		o.RegistryHealthInterval = testHealthInterval
		o.RegistrySweepInterval = 500 * time.Millisecond
		o.RegistryTokenSecret = "default/" + tokenSecret
		o.RegistryListening = func(addr string) { url.Store("https://" + addr) }
		o.LeaderElect, o.LeaderElectionNamespace, o.LeaderElectionID = true, "default", "agentrax-test"
	}
}

// registryCert is the registry API's certificate in the test managers (written once to a directory, for
// --registry-tls-cert-dir) and a client that trusts it. It is httptest's certificate for 127.0.0.1.
type registryCert struct {
	dir    string
	client *http.Client
}

var registryTLS = sync.OnceValue(func() registryCert {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	cert := srv.TLS.Certificates[0]
	dir, err := os.MkdirTemp("", "agentrax-registry-tls-")
	if err != nil {
		panic(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		panic(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		panic(err)
	}
	return registryCert{dir: dir, client: srv.Client()}
})

// inClusterEndpoint is the MCP URL of agent ns/name served by srv: its Service's name and srv's port.
func inClusterEndpoint(ns, name string, srv *mcptest.Server) string {
	return fmt.Sprintf("http://%s.%s.svc:%d/mcp", name, ns, srv.Port())
}

func regURL() string {
	url, _ := leaderURL.Load().(string)
	return url
}

func httpDo(g Gomega, method, url, token, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := registryTLS().client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

// registryEntry reads one agent from the leader's API.
func registryEntry(g Gomega, ns, name string) (registry.Entry, bool) {
	status, body := httpDo(g, http.MethodGet, regURL()+"/agents/"+ns+"/"+name, "", "")
	if status == http.StatusNotFound {
		return registry.Entry{}, false
	}
	g.Expect(status).To(Equal(http.StatusOK), body)
	var e registry.Entry
	g.Expect(json.Unmarshal([]byte(body), &e)).To(Succeed())
	return e, true
}

// exposedAgent creates an agent whose MCP endpoint is srv, in a namespace that uses the real registry.
func exposedAgent(t *testing.T, g Gomega, ns, name string, srv *mcptest.Server, tools ...string) client.ObjectKey {
	t.Helper()
	ad := agentDeployment(ns, name, "q", 1, 2, 0)
	ad.Spec.Port = srv.Port()
	ad.Spec.MCP = &agentraxv1alpha1.MCPSpec{Expose: true, Tools: tools}
	g.Expect(env.Client.Create(context.Background(), ad)).To(Succeed())
	g.Expect(ad.Spec.MCP.Path).To(Equal("/mcp"), "defaulted")
	return client.ObjectKeyFromObject(ad)
}

// registryNamespace is a test namespace with a TenantQuota "q" whose agents use the real registry.
func registryNamespace(t *testing.T, g Gomega) string {
	ns := newNamespace(t)
	useRealRegistry(ns)
	g.Eventually(regURL).ShouldNot(BeEmpty(), "the registry API is listening")
	g.Expect(env.Client.Create(context.Background(), tenantQuota(ns, "q", 10, 0, 40, 10))).To(Succeed())
	return ns
}

func getAgent(g Gomega, key client.ObjectKey) *agentraxv1alpha1.AgentDeployment {
	ad := &agentraxv1alpha1.AgentDeployment{}
	g.Expect(env.Client.Get(context.Background(), key, ad)).To(Succeed())
	return ad
}

// Running with spec.mcp.expose → discovered through a real handshake (paginated tools/list, merged with the
// declared tools) and served by both APIs; 20 heartbeats leave no session on the agent; a new stable image
// with new tools (what a promotion does) updates the entry; deletion deregisters before the finalizer goes.
func TestRegistryDiscoversHeartbeatsAndDeregisters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := registryNamespace(t, g)
	srv := mcptest.Start(t, mcptest.Options{PageSize: 2}, "search", "plan", "summarize")
	key := exposedAgent(t, g, ns, "planner", srv, "declared", "search")

	g.Eventually(func(g Gomega) {
		ad := getAgent(g, key)
		dep := &appsv1.Deployment{}
		g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning), "agent %+v\ndeployment %+v", ad.Status, dep.Status)
		g.Expect(dep.Status.AvailableReplicas).To(BeNumerically(">=", 1), "registered only once its pods run")
		g.Expect(ad.Status.Registered).To(BeTrue())
		e, found := registryEntry(g, ns, "planner")
		g.Expect(found).To(BeTrue())
		g.Expect(e.Tools).To(Equal([]string{"declared", "plan", "search", "summarize"}))
		// The entry holds the in-cluster URL the operator built; only the connection went to loopback.
		g.Expect(e.Endpoint).To(Equal(inClusterEndpoint(ns, "planner", srv)))
		g.Expect(e.Version).To(Equal("v1"))
		g.Expect(e.TTL).To(Equal(int64(testTTL / time.Second)))
	}).Should(Succeed())
	g.Expect(srv.Count("tools/list")).To(BeNumerically(">=", 2), "paginated")
	_, body := httpDo(g, http.MethodGet, regURL()+"/v0.1/servers?search="+ns, "", "")
	g.Expect(body).To(And(ContainSubstring(`"name":"io.agentrax.`+ns+`/planner"`),
		ContainSubstring(`"url":"`+inClusterEndpoint(ns, "planner", srv)+`"`), ContainSubstring(`"count":1`)))

	// Heartbeats come from the reconciler's requeue alone; each one closes the session it opened. The one
	// session left is the registry's notification listener (the server offers tools.listChanged).
	pings := srv.Count("ping")
	g.Eventually(func() int { return srv.Count("ping") - pings }, time.Minute).Should(BeNumerically(">=", 20))
	g.Eventually(srv.Sessions).Should(Equal(1))
	g.Expect(srv.Count("initialize")).To(BeNumerically(">=", 21))

	// A tool added at run time, same image: notifications/tools/list_changed re-lists at once, long before
	// the relist interval (10 min).
	srv.SetTools("search", "plan", "summarize", "translate")
	g.Eventually(func(g Gomega) {
		e, found := registryEntry(g, ns, "planner")
		g.Expect(found).To(BeTrue())
		g.Expect(e.Tools).To(ContainElement("translate"))
		g.Expect(e.Version).To(Equal("v1"))
	}, 10*time.Second).Should(Succeed())

	// A promotion: the stable image changes and the new version offers another tool.
	srv.SetTools("search", "plan", "summarize", "critique")
	g.Expect(updateAgent(ns, "planner", func(ad *agentraxv1alpha1.AgentDeployment) {
		ad.Spec.Image = "ghcr.io/org/agent:v2"
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		e, found := registryEntry(g, ns, "planner")
		g.Expect(found).To(BeTrue())
		g.Expect(e.Tools).To(ContainElement("critique"))
		g.Expect(e.Version).To(Equal("v2"))
	}).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, getAgent(g, key))).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, found := registryEntry(g, ns, "planner")
		g.Expect(found).To(BeFalse())
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &agentraxv1alpha1.AgentDeployment{}))).To(BeTrue())
	}).Should(Succeed())
	// The deregistration ran while the agent was being deleted and still held its finalizer, Service and
	// Deployment. (A reconcile of a stale cached copy may repeat it after the object is gone; it is idempotent.)
	g.Expect(registrar.deregistrations(ns + "/planner")).To(ContainElement(deregistration{Name: ns + "/planner",
		FinalizerPresent: true, DeletionTimestamp: true, ServiceExisted: true, DeploymentExisted: true}))
}

// The agent's server dies: three failed heartbeats in a row (well inside the TTL) deregister it, with
// MCPHandshakeFailed and status.registered=false; when it answers again it is registered again.
func TestRegistryStrikesDeregister(t *testing.T) {
	g := NewWithT(t)
	ns := registryNamespace(t, g)
	srv := mcptest.Start(t, mcptest.Options{}, "search")
	key := exposedAgent(t, g, ns, "flaky", srv)
	g.Eventually(func(g Gomega) {
		g.Expect(getAgent(g, key).Status.Registered).To(BeTrue())
	}).Should(Succeed())

	srv.Kill()
	killed := time.Now()
	g.Eventually(func(g Gomega) {
		ad := getAgent(g, key)
		g.Expect(ad.Status.Registered).To(BeFalse())
		c := meta.FindStatusCondition(ad.Status.Conditions, agentraxv1alpha1.ConditionMCPHandshakeFailed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(agentrax.ReasonHandshakeFailed))
		_, found := registryEntry(g, ns, "flaky")
		g.Expect(found).To(BeFalse())
	}).Should(Succeed())
	g.Expect(time.Since(killed)).To(BeNumerically("<", testTTL), "strikes, not the TTL, removed it")
	// Events are written asynchronously by the recorder.
	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, ns, "flaky", "Deregistered")).To(ContainElement(ContainSubstring("heartbeat 3/3")))
	}).Should(Succeed())

	// The agent comes back (a new server on another port, as a new pod would be behind the Service).
	back := mcptest.Start(t, mcptest.Options{}, "search", "plan")
	g.Expect(updateAgent(ns, "flaky", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Port = back.Port() })).
		To(Succeed())
	g.Eventually(func(g Gomega) {
		ad := getAgent(g, key)
		g.Expect(ad.Status.Registered).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(ad.Status.Conditions, agentraxv1alpha1.ConditionMCPHandshakeFailed)).To(BeTrue())
		e, found := registryEntry(g, ns, "flaky")
		g.Expect(found).To(BeTrue())
		g.Expect(e.Tools).To(Equal([]string{"plan", "search"}))
	}).Should(Succeed())
}

func eventNotes(g Gomega, ns, name, reason string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// startFollower runs a second manager with the same options: it loses the election to the package's
// manager, so its controllers and registry writer stay idle, and it serves reads from its ConfigMap watch.
func startFollower(t *testing.T, g Gomega) string {
	t.Helper()
	var url atomic.Value
	o := manager.DefaultOptions()
	o.Controllers = []string{agentrax.AgentDeploymentControllerName, agentrax.TenantQuotaControllerName}
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.EnableWebhooks = "0", "0", false
	o.SkipControllerNameValidation = true
	o.RegistryBindAddress, o.RegistryNamespace = "127.0.0.1:0", "default"
	registryOptions(&url)(&o)
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, env.Config, o)
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager stopped with an error: %v", err)
		}
	})
	g.Eventually(url.Load).ShouldNot(BeNil())
	return url.Load().(string)
}

// Leader and follower answer GET /agents and /v0.1/servers identically; writes need a token (401 without,
// 503 from the follower with one).
func TestRegistryLeaderAndFollower(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := registryNamespace(t, g)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: tokenSecret},
		StringData: map[string]string{"token": writeToken}}
	if err := env.Client.Create(ctx, sec); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	follower := startFollower(t, g)

	srv := mcptest.Start(t, mcptest.Options{Stateless: true}, "review")
	exposedAgent(t, g, ns, "reviewer", srv)
	post := `{"namespace":"` + ns + `","name":"external","endpoint":"https://external.example.com/mcp","tools":["x"],"ttl":60}`
	for _, url := range []string{regURL(), follower} {
		status, body := httpDo(g, http.MethodPost, url+"/agents", "", post)
		g.Expect(status).To(Equal(http.StatusUnauthorized), body)
		status, _ = httpDo(g, http.MethodDelete, url+"/agents/"+ns+"/reviewer", "", "")
		g.Expect(status).To(Equal(http.StatusUnauthorized))
		status, _ = httpDo(g, http.MethodPost, url+"/agents", "wrong", post)
		g.Expect(status).To(Equal(http.StatusUnauthorized))
	}
	status, body := httpDo(g, http.MethodPost, follower+"/agents", writeToken, post)
	g.Expect(status).To(Equal(http.StatusServiceUnavailable), body)
	status, body = httpDo(g, http.MethodPost, regURL()+"/agents", writeToken, post)
	g.Expect(status).To(Equal(http.StatusCreated), body)

	g.Eventually(func(g Gomega) {
		_, leaderAgents := httpDo(g, http.MethodGet, regURL()+"/agents", "", "")
		g.Expect(leaderAgents).To(And(ContainSubstring(`"name":"reviewer"`), ContainSubstring(`"name":"external"`)))
		_, followerAgents := httpDo(g, http.MethodGet, follower+"/agents", "", "")
		g.Expect(followerAgents).To(Equal(leaderAgents))
		_, leaderServers := httpDo(g, http.MethodGet, regURL()+"/v0.1/servers?limit=100", "", "")
		_, followerServers := httpDo(g, http.MethodGet, follower+"/v0.1/servers?limit=100", "", "")
		g.Expect(followerServers).To(Equal(leaderServers))
	}).Should(Succeed())

	status, _ = httpDo(g, http.MethodDelete, regURL()+"/agents/"+ns+"/external", writeToken, "")
	g.Expect(status).To(Equal(http.StatusNoContent))
	g.Eventually(func(g Gomega) {
		_, followerAgents := httpDo(g, http.MethodGet, follower+"/agents", "", "")
		g.Expect(followerAgents).NotTo(ContainSubstring(`"name":"external"`))
		g.Expect(followerAgents).To(ContainSubstring(`"name":"reviewer"`))
	}).Should(Succeed())
}

// The operator stops; meanwhile one agent is deleted with its finalizer bypassed. The restarted manager
// recovers both entries from the ConfigMap (the deleted agent's can come from nowhere else), keeps
// heartbeating the live one, and sweeps the orphan within one TTL.
func TestRegistryColdRestartAndOrphanSweep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := registryNamespace(t, g)
	liveSrv := mcptest.Start(t, mcptest.Options{}, "search")
	goneSrv := mcptest.Start(t, mcptest.Options{}, "plan")
	live := exposedAgent(t, g, ns, "live", liveSrv)
	gone := exposedAgent(t, g, ns, "gone", goneSrv)
	var liveEntry registry.Entry
	g.Eventually(func(g Gomega) {
		var found bool
		liveEntry, found = registryEntry(g, ns, "live")
		g.Expect(found).To(BeTrue())
		_, found = registryEntry(g, ns, "gone")
		g.Expect(found).To(BeTrue())
	}).Should(Succeed())

	// The registry serves a change before its ConfigMap write lands (a failed write is retried at the next
	// sweep); stop only once both entries are persisted, which is what a restart can recover.
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: cmstore.Name}, cm)).To(Succeed())
		for _, name := range []string{"live", "gone"} {
			g.Expect(cm.Data[cmstore.Key]).To(MatchRegexp(`"namespace":\s*"%s",\s*"name":\s*"%s"`, ns, name))
		}
	}).Should(Succeed())
	g.Expect(env.StopManager()).To(Succeed())
	leaderURL.Store("")
	// The controllers are down, but admission is served (as another replica would): the finalizer is
	// removed by hand and the agent deleted, so nothing ever deregisters it.
	stopWebhooks := serveWebhooksOnly(t, g)
	ad := getAgent(g, gone)
	ad.Finalizers = nil
	g.Expect(env.Client.Update(ctx, ad)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, ad)).To(Succeed())
	stopWebhooks()
	goneSrv.Kill()
	// The new leader loads the ConfigMap after this instant; a loaded entry has one TTL of grace from its load.
	beforeStart := time.Now()
	g.Expect(env.StartManager()).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(regURL()).NotTo(BeEmpty())
		e, found := registryEntry(g, ns, "live")
		g.Expect(found).To(BeTrue())
		g.Expect(e.RegisteredAt).To(Equal(liveEntry.RegisteredAt), "recovered, not registered anew")
		_, found = registryEntry(g, ns, "gone")
		g.Expect(found).To(BeTrue(), "only the ConfigMap knows this one")
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		_, found := registryEntry(g, ns, "gone")
		g.Expect(found).To(BeFalse())
	}, testTTL+15*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(time.Since(beforeStart)).To(BeNumerically(">=", testTTL), "a loaded entry gets one TTL of grace")
	_, found := registryEntry(g, ns, "live")
	g.Expect(found).To(BeTrue(), "heartbeats keep the live agent")
	g.Expect(getAgent(g, live).Status.Registered).To(BeTrue())
}

// serveWebhooksOnly serves the AgentDeployment webhooks where the test environment points the API server,
// without any controller, until the returned function is called.
func serveWebhooksOnly(t *testing.T, g Gomega) func() {
	t.Helper()
	serving := env.WebhookServing()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 operator.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{Host: serving.LocalServingHost,
			Port: serving.LocalServingPort, CertDir: serving.LocalServingCertDir}),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(agentraxwebhooks.SetupAgentDeploymentWebhook(mgr, "")).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	g.Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).Should(Succeed())
	return func() {
		cancel()
		g.Expect(<-done).To(Succeed(), "webhook manager stopped with an error")
	}
}
