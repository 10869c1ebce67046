package promreal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	managerpkg "github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
)

// scrapes are what the operator's two programs serve at /metrics:
//   - manager: the real manager (internal/manager, as cmd/main.go builds it) running every controller on the
//     cluster-grade control plane, config/samples applied with the devstack peers (Fleet API, gNMIc collector
//     stand-ins, the TargetSource inventory) and converged, like `make dev`;
//   - katastroma: the katastroma binary (cmd/katastroma, the gitops stage and pharos image), built and run as two
//     processes, `all-in-one` and `pharos`, after one event of the sample Tenant went through the stages. The
//     stage, provisioner and pharos metrics live in that binary, not in the manager.
//
// A family with no series is absent from a scrape, so a rule or dashboard naming a metric whose series only appear
// after some event fails here: such series are set to zero where their label values are known at start.
type scrapes struct {
	manager, katastroma exported
}

var (
	scrapeOnce   sync.Once
	scraped      *scrapes
	errScrape    error
	scrapeStops  []func()
	scrapeLogDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(scrapeStops) - 1; i >= 0; i-- {
		scrapeStops[i]()
	}
	os.Exit(code)
}

// operatorScrapes starts the stack once per package run (the first test that needs it pays) and returns the
// scrapes; the stack stops after the last test.
func operatorScrapes(t *testing.T) *scrapes {
	t.Helper()
	// Without the control-plane build (make envtest) the start fails below, as every envtest package does.
	scrapeOnce.Do(func() {
		started := time.Now()
		scraped, errScrape = startAndScrape(context.Background())
		t.Logf("operator stack started and scraped in %s (logs: %s)", time.Since(started).Round(time.Second), scrapeLogDir)
	})
	if errScrape != nil {
		t.Fatalf("scraping the operator's /metrics: %v", errScrape)
	}
	return scraped
}

func startAndScrape(ctx context.Context) (*scrapes, error) {
	dir, err := os.MkdirTemp("", "promreal-")
	if err != nil {
		return nil, err
	}
	scrapeStops = append(scrapeStops, func() { _ = os.RemoveAll(dir) })
	fleet, err := devstack.StartFleet(dir, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	scrapeStops = append(scrapeStops, fleet.Close)
	collectors, err := devstack.StartCollectors(3)
	if err != nil {
		return nil, err
	}
	scrapeStops = append(scrapeStops, collectors.Close)
	dial := &devdial.Map{}
	if err := dial.Add(collectors.DialEntries()); err != nil {
		return nil, err
	}
	metricsPort, err := asinstalled.FreePort()
	if err != nil {
		return nil, err
	}
	env, err := testenv.Start(testenv.Options{Controllers: testenv.AllControllers(), Cluster: &testenv.ClusterOptions{},
		Manager: func(o *managerpkg.Options) {
			fleet.ManagerOptions(o)
			o.DevDialMap = dial
			// Plain HTTP: the secure endpoint serves the same registry behind authentication and authorization.
			o.MetricsBindAddress, o.SecureMetrics = fmt.Sprintf("127.0.0.1:%d", metricsPort), false
		}})
	if err != nil {
		return nil, err
	}
	scrapeStops = append(scrapeStops, func() { _ = env.Stop() })
	// The sample Cluster's API is mutual TLS: the stand-ins serve the certificate the operator issues.
	followCtx, stopFollowing := context.WithCancel(ctx)
	scrapeStops = append(scrapeStops, stopFollowing)
	collectors.Follow(followCtx, env.Client)
	scrapeLogDir = env.Cluster.LogDir()

	const owner = "promreal"
	if err := devstack.ApplyInventory(ctx, env.Client, owner); err != nil {
		return nil, err
	}
	if err := fleet.CreateSecret(ctx, env.Client); err != nil {
		return nil, err
	}
	if _, err := testenv.ApplySamples(ctx, env.Client, filepath.Join(testenv.RepoRoot(), "config", "samples"), "default", owner); err != nil {
		return nil, err
	}
	if err := fleet.ApplyDevSync(ctx, env.Client); err != nil {
		return nil, err
	}
	// A Collector no collector registered as: the Fleet API answers its GetCollector with 404, the one failed
	// request that fleet_api_errors_total (labelled by operation and HTTP status) needs to have a series.
	unregistered := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "promreal-unregistered"},
		Spec: fleetv1alpha1.CollectorSpec{ID: "promreal-unregistered"}}
	if err := env.Client.Create(ctx, unregistered); err != nil {
		return nil, err
	}
	katastroma, err := startKatastroma(env, dir)
	if err != nil {
		return nil, err
	}
	if missing := devstack.WaitConverged(ctx, env.Client, 4*time.Minute, func(string, time.Duration) {}); len(missing) > 0 {
		return nil, fmt.Errorf("samples not in their steady state: %v", missing)
	}
	if err := waitFor(ctx, func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(unregistered), unregistered)
		ready := meta.FindStatusCondition(unregistered.Status.Conditions, fleetv1alpha1.ConditionReady)
		return ready != nil && ready.Reason == fleetv1alpha1.ReasonNotRegistered, err
	}); err != nil {
		return nil, fmt.Errorf("the Collector %s: %w", unregistered.Spec.ID, err)
	}
	s := &scrapes{}
	if s.manager, err = scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)); err != nil {
		return nil, fmt.Errorf("the manager: %w", err)
	}
	if s.katastroma, err = katastroma(ctx); err != nil {
		return nil, fmt.Errorf("katastroma: %w", err)
	}
	return s, nil
}

// startKatastroma builds cmd/katastroma and runs `katastroma all-in-one` (against the control plane, as an
// administrator) and `katastroma pharos`. The returned function deploys one event of the sample Tenant through the
// pipeline and scrapes both processes.
func startKatastroma(env *testenv.Env, dir string) (func(context.Context) (exported, error), error) {
	bin := filepath.Join(dir, "katastroma")
	build := exec.Command("go", "build", "-o", bin, "./cmd/katastroma")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/katastroma: %w\n%s", err, out)
	}
	kubeconfig, err := env.AddAdminKubeconfig("promreal-katastroma")
	if err != nil {
		return nil, err
	}
	kubeconfigFile := filepath.Join(dir, "katastroma.kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	var addrs [5]string
	for i := range addrs {
		port, err := asinstalled.FreePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	stagesMetrics, pharosMetrics := addrs[2], addrs[3]
	// all-in-one serves every stage on its own loopback port and logs the source stage's.
	// The test's repository is served on loopback, which the source stage's fetch guard refuses unless told.
	stages, err := env.Cluster.Run("katastroma-all-in-one", []string{"KUBECONFIG=" + kubeconfigFile,
		"KATASTROMA_REPOSITORY_ALLOW_FOR_TESTING=127.0.0.1/32"}, bin, "all-in-one",
		"--http-bind-address="+addrs[1], "--metrics-bind-address="+stagesMetrics)
	if err != nil {
		return nil, err
	}
	pharos, err := env.Cluster.Run("katastroma-pharos", nil, bin, "pharos",
		"--otlp-grpc-address="+addrs[4], "--otlp-http-address=127.0.0.1:0", "--metrics-bind-address="+pharosMetrics)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (exported, error) {
		var sourceAddr string
		if err := waitFor(ctx, func() (bool, error) {
			sourceAddr = loggedSourceAddress(stages.LogFile())
			return sourceAddr != "", stages.Exited()
		}); err != nil {
			return nil, fmt.Errorf("katastroma all-in-one logged no source address: %w", err)
		}
		if err := deployOneEvent(ctx, env, dir, sourceAddr); err != nil {
			return nil, errors.Join(err, stages.Exited())
		}
		// pharos publishes its state on its first tick, a second after it starts: wait for its events gauge.
		if err := waitFor(ctx, func() (bool, error) {
			e, err := scrapeOnceFrom("http://" + pharosMetrics + "/metrics")
			_, published := e["katastroma_pharos_events"]
			return err == nil && published, pharos.Exited()
		}); err != nil {
			return nil, fmt.Errorf("pharos published no katastroma_pharos_events: %w", err)
		}
		all := exported{}
		for addr, p := range map[string]*testenv.Process{stagesMetrics: stages, pharosMetrics: pharos} {
			e, err := scrape(ctx, "http://"+addr+"/metrics")
			if err != nil {
				return nil, errors.Join(err, p.Exited())
			}
			for n, typ := range e {
				all[n] = typ
			}
		}
		return all, nil
	}, nil
}

// loggedSourceAddress is the source stage's address from the "pipeline running" line of all-in-one's JSON log.
func loggedSourceAddress(logFile string) string {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		var entry struct {
			Msg    string `json:"msg"`
			Source string `json:"source"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "pipeline running" {
			return entry.Source
		}
	}
	return ""
}

// deployOneEvent commits a ConfigMap to a local repository, serves it over smart HTTP on loopback (git
// http-backend: the source stage fetches only over the network, through its guard), makes it a source target of the
// sample Tenant's namespace, asks the source stage at grpcAddr to retrieve it and waits until the provisioner applied it: one
// event through every stage, so the series labelled by tenant exist.
func deployOneEvent(ctx context.Context, env *testenv.Env, dir, grpcAddr string) error {
	const ns, target = "team-demo", "promreal"
	repoDir := filepath.Join(dir, "repo")
	repo, err := git.PlainInit(repoDir, false)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(repoDir, "deploy"), 0o755); err != nil {
		return err
	}
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: promreal-deployed\ndata:\n  from: promreal\n"
	if err := os.WriteFile(filepath.Join(repoDir, "deploy", "cm.yaml"), []byte(manifest), 0o644); err != nil {
		return err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if _, err := wt.Add("deploy/cm.yaml"); err != nil {
		return err
	}
	commit, err := wt.Commit("promreal", &git.CommitOptions{Author: &object.Signature{Name: "promreal", Email: "promreal@localhost", When: time.Now()}})
	if err != nil {
		return err
	}
	head, err := repo.Head()
	if err != nil {
		return err
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return fmt.Errorf("git is required to serve the test repository: %w", err)
	}
	server := httptest.NewServer(&cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"}})
	// Later polls of the target fetch again while the stack runs; the server goes with the stack's context.
	context.AfterFunc(ctx, server.Close)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: target,
		Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
		Data: map[string]string{"repo-url": server.URL + "/repo", "ref": head.Name().Short(), "path": "deploy"}}); err != nil {
		return err
	}
	conn, err := stage.Dial(grpcAddr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	var lastErr error
	if err := waitFor(ctx, func() (bool, error) {
		_, lastErr = katastromav1.NewSourceHandlerServiceClient(conn).Retrieve(ctx,
			&katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: target})
		return lastErr == nil, nil
	}); err != nil {
		return fmt.Errorf("retrieving commit %s: %w (last answer: %w)", commit, err, lastErr)
	}
	deployed := &corev1.ConfigMap{}
	if err := waitFor(ctx, func() (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "promreal-deployed"}, deployed)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("the provisioner did not apply commit %s: %w", commit, err)
	}
	return nil
}

// waitFor polls done every 200 ms until it is true, it fails, or a minute passed.
func waitFor(ctx context.Context, done func() (bool, error)) error {
	const timeout = time.Minute
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrape reads a /metrics endpoint with the Prometheus text parser, polling (waitFor's deadline) while the
// endpoint does not answer yet.
func scrape(ctx context.Context, url string) (exported, error) {
	var e exported
	var lastErr error
	if err := waitFor(ctx, func() (bool, error) {
		e, lastErr = scrapeOnceFrom(url)
		return lastErr == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("scraping %s: %w (last error: %w)", url, err, lastErr)
	}
	return e, nil
}

func scrapeOnceFrom(url string) (exported, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return parseExposition(resp.Body)
}

// parseExposition reads the Prometheus text exposition format: every family with at least one sample.
func parseExposition(r io.Reader) (exported, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	e := exported{}
	for name, f := range families {
		if len(f.GetMetric()) > 0 {
			e[name] = f.GetType()
		}
	}
	return e, nil
}

// names lists a scrape's families, sorted, for failure messages.
func (e exported) names() string {
	var out []string
	for n := range e {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
