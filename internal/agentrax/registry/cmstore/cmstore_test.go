package cmstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry/cmstore"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{}))
}

func namespace(t *testing.T, g Gomega) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "reg-"}}
	g.Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

func entry(i int) registry.Entry {
	name := fmt.Sprintf("agent-%d", i)
	return registry.Entry{Namespace: "team-a", Name: name, Endpoint: "http://" + name + ".team-a.svc:8080/mcp",
		Tools: []string{"search", fmt.Sprintf("t%d", i)}}
}

// testClient trusts httptest's certificate (every httptest TLS server uses it) and speaks plain HTTP too.
var testClient = func() *http.Client {
	s := httptest.NewTLSServer(http.NotFoundHandler())
	defer s.Close()
	return s.Client()
}()

func get(g Gomega, url string) string {
	resp, err := testClient.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	return string(b)
}

func configMapVersion(g Gomega, ns string) string {
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: cmstore.Name}, &cm)).
		To(Succeed())
	return cm.ResourceVersion
}

// Two replicas: the leader writes the ConfigMap, the follower applies its watch; both answer the same reads.
// Then the leader dies, the follower is elected and finds everything; a third replica cold-starts from the
// ConfigMap alone.
func TestLeaderFollowerAndColdRestart(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := namespace(t, g)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	leader := registry.New(registry.Options{Persister: &cmstore.Store{Client: env.Client, Namespace: ns}})
	g.Expect(leader.BecomeLeader(ctx)).To(Succeed())
	follower := registry.New(registry.Options{Persister: &cmstore.Store{Client: env.Client, Namespace: ns}})
	go func() { _ = cmstore.Follow(ctx, wc, ns, "", follower) }()

	leaderAPI := httptest.NewServer(registry.Handler(leader, registry.StaticToken("t")))
	defer leaderAPI.Close()
	followerAPI := httptest.NewTLSServer(registry.Handler(follower, registry.StaticToken("t")))
	defer followerAPI.Close()

	for i := range 5 {
		_, err := leader.Register(ctx, entry(i))
		g.Expect(err).NotTo(HaveOccurred())
	}
	gone := entry(3)
	_, err = leader.Deregister(ctx, gone.Key())
	g.Expect(err).NotTo(HaveOccurred())
	want := get(g, leaderAPI.URL+"/agents")
	g.Expect(want).To(ContainSubstring(`"name":"agent-4"`))
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, followerAPI.URL+"/agents")).To(Equal(want))
		g.Expect(get(g, followerAPI.URL+"/v0.1/servers")).To(Equal(get(g, leaderAPI.URL+"/v0.1/servers")))
	}).Should(Succeed())

	// Steady state: heartbeats, same-content re-registrations and sweeps do not touch the ConfigMap.
	rv := configMapVersion(g, ns)
	for _, i := range []int{0, 1, 2, 4} {
		e := entry(i)
		_, _, _ = leader.Heartbeat(ctx, e.Key(), true)
		_, _ = leader.Register(ctx, e)
	}
	_, err = leader.Sweep(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(configMapVersion(g, ns)).To(Equal(rv))
	g.Expect(leader.Saves()).To(Equal(int64(6)), "5 registrations + 1 deregistration")

	// A write on the follower is refused; it would otherwise fork the state.
	req, _ := http.NewRequest(http.MethodDelete, followerAPI.URL+"/agents/team-a/agent-0", nil)
	req.Header.Set("Authorization", "Bearer t")
	resp, err := followerAPI.Client().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))

	// The leader goes away; the follower is elected and keeps serving the same, then writes.
	leader.SetLeader(false)
	g.Expect(follower.BecomeLeader(ctx)).To(Succeed())
	g.Expect(get(g, followerAPI.URL+"/agents")).To(Equal(want))
	_, err = follower.Register(ctx, entry(9))
	g.Expect(err).NotTo(HaveOccurred())

	// Cold restart: a fresh replica recovers everything from the ConfigMap.
	fresh := registry.New(registry.Options{Persister: &cmstore.Store{Client: env.Client, Namespace: ns}})
	g.Expect(fresh.Load(ctx)).To(Succeed())
	g.Expect(fresh.List()).To(Equal(follower.List()))
	g.Expect(fresh.List()).To(HaveLen(5))
}

func TestSecretToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registry-token"},
		Data: map[string][]byte{"token": []byte("first\n")}}
	g.Expect(env.Client.Create(ctx, sec)).To(Succeed())
	auth := &registry.SecretToken{Reader: env.Client, Secret: types.NamespacedName{Namespace: ns, Name: "registry-token"}}

	_, err := auth.Authenticate(ctx, "first")
	g.Expect(err).NotTo(HaveOccurred(), "a trailing newline in the Secret is not part of the token")
	_, err = auth.Authenticate(ctx, "second")
	g.Expect(err).To(MatchError(registry.ErrUnauthenticated))

	sec.Data["token"] = []byte("second")
	g.Expect(env.Client.Update(ctx, sec)).To(Succeed())
	_, err = auth.Authenticate(ctx, "second")
	g.Expect(err).NotTo(HaveOccurred(), "rotation needs no restart")
	_, err = auth.Authenticate(ctx, "first")
	g.Expect(err).To(MatchError(registry.ErrUnauthenticated))

	missing := &registry.SecretToken{Reader: env.Client, Secret: types.NamespacedName{Namespace: ns, Name: "nope"}}
	_, err = missing.Authenticate(ctx, "second")
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, registry.ErrUnauthenticated)).To(BeFalse(), "a missing Secret is an outage (503)")
}

// TokenReview against the real API server with real ServiceAccount tokens: the audience is checked, a listed
// ServiceAccount writes its own namespace only, a cluster-wide one writes everywhere.
func TestTokenReview(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t, g)
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	token := func(sa string, audiences ...string) string {
		_ = env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600)), Audiences: audiences},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	const aud = "agentrax-registry"
	scopedTok, adminTok, other := token("orchestrator", aud), token("admin", aud), token("someone-else", aud)
	apiServerTok := token("orchestrator") // the API server's own audience
	auth := &registry.TokenReview{Client: env.Client, Allowed: []string{ns + "/orchestrator"},
		ClusterWide: []string{ns + "/admin"}, Audiences: []string{aud}}

	id, err := auth.Authenticate(ctx, scopedTok)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(registry.Identity{User: "system:serviceaccount:" + ns + ":orchestrator", Namespace: ns}))
	id, err = auth.Authenticate(ctx, adminTok)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.Namespace).To(BeEmpty(), "cluster-wide")
	_, err = auth.Authenticate(ctx, other)
	g.Expect(err).To(MatchError(registry.ErrForbidden))
	_, err = auth.Authenticate(ctx, "not-a-token")
	g.Expect(err).To(MatchError(registry.ErrUnauthenticated))
	_, err = auth.Authenticate(ctx, apiServerTok)
	g.Expect(err).To(MatchError(registry.ErrUnauthenticated), "a token for the API server is not one for the registry")

	// Through the API.
	r := registry.New(registry.Options{})
	r.SetLeader(true)
	srv := httptest.NewTLSServer(registry.Handler(r, auth))
	defer srv.Close()
	body := func(namespace string) string {
		return fmt.Sprintf(`{"namespace":%q,"name":"x","endpoint":"http://x.%s.svc:8080/mcp","tools":[]}`, namespace, namespace)
	}
	for _, tc := range []struct {
		tok, ns string
		want    int
	}{
		{scopedTok, ns, 201}, {scopedTok, "team-b", 403}, {adminTok, "team-b", 201}, {other, ns, 403},
		{apiServerTok, ns, 401}, {"", ns, 401},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/agents", strings.NewReader(body(tc.ns)))
		if tc.tok != "" {
			req.Header.Set("Authorization", "Bearer "+tc.tok)
		}
		resp, err := srv.Client().Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(tc.want), "namespace %s", tc.ns)
	}
}

func ptr[T any](v T) *T { return &v }

// replica is one manager process: leader election on a Lease, the registry service on a loopback port.
type replica struct {
	reg    *registry.Registry
	url    string
	cancel context.CancelFunc
	done   chan struct{} // closed when the manager has returned
}

func startReplica(t *testing.T, g Gomega, ns string) *replica {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                        env.Client.Scheme(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "agentrax-registry",
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr(3 * time.Second),
		RenewDeadline:                 ptr(2 * time.Second),
		RetryPeriod:                   ptr(200 * time.Millisecond),
	})
	g.Expect(err).NotTo(HaveOccurred())
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	r := &replica{reg: registry.New(registry.Options{Persister: &cmstore.Store{Client: env.Client, Namespace: ns}}),
		done: make(chan struct{})}
	addr := make(chan string, 1)
	// Replication, not transport, is under test here: writes over plain HTTP on loopback.
	svc := &cmstore.Service{Registry: r.reg, Addr: "127.0.0.1:0", Auth: registry.StaticToken("t"), Watcher: wc,
		Namespace: ns, Listening: func(a string) { addr <- a }, PlaintextWrites: true}
	g.Expect(svc.AddTo(mgr)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = mgr.Start(ctx)
	}()
	g.Eventually(addr).Should(Receive(&r.url))
	r.url = "http://" + r.url
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func post(g Gomega, url string, i int) int {
	e := entry(i)
	body := fmt.Sprintf(`{"namespace":%q,"name":%q,"endpoint":%q,"tools":["search"]}`, e.Namespace, e.Name, e.Endpoint)
	req, _ := http.NewRequest(http.MethodPost, url+"/agents", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer t")
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	return resp.StatusCode
}

// Two manager replicas with real leader election: the leader writes, the follower serves the same reads from
// its watch and refuses writes; when the leader stops, the follower takes over with the same state.
func TestTwoReplicas(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, g)
	a := startReplica(t, g, ns)
	g.Eventually(a.reg.IsLeader).Should(BeTrue())
	b := startReplica(t, g, ns)
	g.Consistently(b.reg.IsLeader, "1s").Should(BeFalse())

	for i := range 3 {
		g.Expect(post(g, a.url, i)).To(Equal(http.StatusCreated))
	}
	g.Expect(post(g, b.url, 7)).To(Equal(http.StatusServiceUnavailable), "the follower does not write")
	want := get(g, a.url+"/agents")
	g.Expect(want).To(ContainSubstring(`"name":"agent-2"`))
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, b.url+"/agents")).To(Equal(want))
		g.Expect(get(g, b.url+"/v0.1/servers?limit=100")).To(Equal(get(g, a.url+"/v0.1/servers?limit=100")))
	}).Should(Succeed())

	a.cancel()
	g.Eventually(a.done).Should(BeClosed())
	g.Eventually(b.reg.IsLeader).Should(BeTrue())
	g.Expect(get(g, b.url+"/agents")).To(Equal(want))
	g.Expect(post(g, b.url, 7)).To(Equal(http.StatusCreated))
	g.Expect(get(g, b.url+"/agents")).To(ContainSubstring(`"name":"agent-7"`))
}
