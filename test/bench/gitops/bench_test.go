// Package gitops benchmarks the katastroma pipeline end to end (signed webhook → objects applied) against
// `kubectl apply --server-side` of the same rendered manifests, in the same run on the same control plane.
package gitops

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/labeler"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/renderer"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

const manifests = 1000

// Bounds of issue #40, asserted on the median of the rounds' ratios against kubectl measured in the same round.
const (
	maxDeployRatio   = 1.5
	maxNoChangeRatio = 0.2
)

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func git(b *testing.B, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@x", "GIT_COMMITTER_NAME=b",
		"GIT_COMMITTER_EMAIL=b@x")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// tenant sets up a tenant namespace as the Tenant controller does: labelled for its Tenant (named like it), which
// lists it as claimed, so the stages' namespace check (stage.KubeServed) admits its work.
func tenant(ctx context.Context, b *testing.B, c client.Client, ns string) {
	t := &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{ns}}}
	must(b, c.Create(ctx, t))
	t.Status.Namespaces = []string{ns}
	must(b, c.Status().Update(ctx, t))
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{gitopsv1alpha1.LabelTenant: ns}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github-webhook-secret"},
			StringData: map[string]string{"webhook-secret": "bench"}},
	}
	for sa, verbs := range map[string][]string{"provisioner": tenancy.ProvisionerVerbs, "pruner": tenancy.PrunerVerbs} {
		objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}})
	}
	for _, o := range objs {
		must(b, c.Create(ctx, o))
	}
}

func deliver(b *testing.B, url, ns, repoURL, sha string, files []string) {
	body, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": sha,
		"repository": map[string]any{"clone_url": repoURL},
		"commits":    []map[string]any{{"added": files}}})
	must(b, err)
	m := hmac.New(sha256.New, []byte("bench"))
	m.Write(body)
	req, err := http.NewRequest(http.MethodPost, url+"/webhook/"+ns, bytes.NewReader(body))
	must(b, err)
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	must(b, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b.Fatalf("webhook answered %d", resp.StatusCode)
	}
}

// waitDone waits until the source target recorded a result for the event of commit sha.
func waitDone(ctx context.Context, b *testing.B, c client.Client, ns, sha string) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		cm := &corev1.ConfigMap{}
		must(b, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bench"}, cm))
		if cm.Annotations[pipeline.AnnotationEventCommit] == sha && cm.Annotations[pipeline.AnnotationResult] != "" {
			if r := cm.Annotations[pipeline.AnnotationResult]; r != "succeeded" {
				b.Fatalf("event for %s ended %s", sha, r)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("event for %s did not finish", sha)
}

func resourceVersions(ctx context.Context, b *testing.B, c client.Client, ns string) map[string]string {
	var l corev1.ConfigMapList
	must(b, c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{pipeline.LabelSourceTarget: ns + ".bench"}))
	out := map[string]string{}
	for _, cm := range l.Items {
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// benchPlatform is the namespace of the Platform whose stage identity the stages call each other with.
const benchPlatform = "bench-platform"

// stageAuth turns stage authentication on, as a Platform runs its stages (--stage-callers, --stage-token-file):
// every call carries a projected-style token (TokenRequest, audience stage.Audience) of a stage ServiceAccount of
// the Platform, every stage reviews it with the API server (TokenReview, cached) and checks that the work's
// namespace is one the Platform serves (stage.KubeServed). GITOPS_BENCH_STAGE_AUTH=off measures without it.
func stageAuth(ctx context.Context, b *testing.B, c client.Client) stage.Connection {
	if os.Getenv("GITOPS_BENCH_STAGE_AUTH") == "off" {
		return stage.Connection{}
	}
	must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchPlatform}}))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: benchPlatform, Name: "katastroma-source"}}
	must(b, c.Create(ctx, sa))
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{stage.Audience}}}
	must(b, c.SubResource("token").Create(ctx, sa, tr))
	tokenFile := filepath.Join(b.TempDir(), "token")
	must(b, os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600))
	callers := []string{benchPlatform}
	return stage.Connection{TokenFile: tokenFile, Auth: &stage.Authenticator{Review: stage.KubeReview(c),
		Namespaces: callers, Served: stage.KubeServed(c, callers)}}
}

// gitDaemon is the git-daemon program itself: `git daemon` runs it as a child process, which outlives a killed
// `git` and would keep serving (and its port) after the test.
func gitDaemon() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-daemon"), nil
}

func BenchmarkPipelineVsKubectl(b *testing.B) {
	ctx := context.Background()
	// The operator's CRDs (Tenant) without its webhook configurations: no manager serves them here.
	env, err := testenv.Start(testenv.Options{WithoutOperator: true,
		ExtraCRDPaths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")}})
	must(b, err)
	defer func() { _ = env.Stop() }()
	c := env.Client

	// A repository of 1,000 ConfigMaps served by git daemon.
	base := b.TempDir()
	bare, work := filepath.Join(base, "srv", "bench.git"), filepath.Join(base, "work")
	must(b, os.MkdirAll(bare, 0o755))
	must(b, os.MkdirAll(filepath.Join(work, "deploy"), 0o755))
	git(b, bare, "init", "-q", "--bare", "-b", "main")
	git(b, bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
	git(b, work, "init", "-q", "-b", "main")
	files := make([]string, 0, manifests)
	for i := range manifests {
		name := fmt.Sprintf("deploy/cm-%04d.yaml", i)
		files = append(files, name)
		must(b, os.WriteFile(filepath.Join(work, name), []byte(fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\ndata:\n  index: %q\n  payload: %q\n",
			i, fmt.Sprint(i), strings.Repeat("x", 200))), 0o644))
	}
	git(b, work, "add", "-A")
	git(b, work, "commit", "-q", "-m", "bench")
	git(b, work, "push", "-q", bare, "main")
	sha := git(b, work, "rev-parse", "HEAD")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(b, err)
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	daemonBin, err := gitDaemon()
	must(b, err)
	daemon := exec.Command(daemonBin, "--export-all", "--reuseaddr", "--listen=127.0.0.1",
		fmt.Sprintf("--port=%d", port), "--base-path="+filepath.Join(base, "srv"), filepath.Join(base, "srv"))
	must(b, daemon.Start())
	defer func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }()
	repoURL := fmt.Sprintf("git://127.0.0.1:%d/bench.git", port)
	for i := 0; ; i++ {
		if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			_ = conn.Close()
			break
		}
		if i > 200 {
			b.Fatal("git daemon did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The pipeline's API requests are counted (every stage's client, impersonated ones included, is built from
	// this config), so the no-change push reports the requests it makes besides its time.
	requests := &requestCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(requests.wrap)
	p, err := runner.StartAll(pctx, runner.Options{HTTPAddr: "127.0.0.1:0", Config: cfg,
		Scheme: operator.NewScheme(), RepositoryAllowForTesting: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Connection: stageAuth(ctx, b, c)})
	must(b, err)

	// Baseline input: the same manifests rendered and labelled as the pipeline does, applied by kubectl.
	fileSet := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(work, f))
		must(b, err)
		fileSet[strings.TrimPrefix(f, "deploy/")] = data
	}
	objs, _, err := renderer.Render(fileSet, renderer.Input{})
	must(b, err)
	var rendered bytes.Buffer
	for _, u := range objs {
		must(b, labeler.Label(u, pipeline.Context{Tenant: "kubectl", Namespace: "kubectl", SourceTarget: "bench",
			RepoURL: repoURL, Ref: "main", Path: "deploy", Commit: sha}))
		y, err := pipeline.MarshalYAML(u)
		must(b, err)
		rendered.WriteString("---\n")
		rendered.Write(y)
	}
	manifestFile := filepath.Join(base, "rendered.yaml")
	must(b, os.WriteFile(manifestFile, rendered.Bytes(), 0o644))
	kubeconfig, err := env.AddAdminKubeconfig("bench")
	must(b, err)
	kubeconfigFile := filepath.Join(base, "kubeconfig")
	must(b, os.WriteFile(kubeconfigFile, kubeconfig, 0o600))
	kubectl := filepath.Join(testenv.RepoRoot(), "bin", "k8s", "kubectl")

	var results []round
	rounds := benchRounds(b)
	for i := 0; i < b.N*rounds; i++ {
		ns, kns := fmt.Sprintf("bench-%d", i), fmt.Sprintf("kubectl-%d", i)
		tenant(ctx, b, c, ns)
		must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kns}}))
		must(b, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench",
			Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
			Data: map[string]string{"repo-url": repoURL, "ref": "main", "path": "deploy"}}))
		r := round{load: loadAverage()}
		kubectlApply := func() time.Duration {
			start := time.Now()
			cmd := exec.Command(kubectl, "--kubeconfig", kubeconfigFile, "apply", "--server-side",
				"--field-manager", "bench", "-n", kns, "-f", manifestFile)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("kubectl: %v\n%s", err, out)
			}
			return time.Since(start)
		}
		pipelineDeploy := func() time.Duration {
			start := time.Now()
			deliver(b, p.WebhookURL(), ns, repoURL, sha, files)
			waitDone(ctx, b, c, ns, sha)
			return time.Since(start)
		}
		// Baseline and candidate run back to back in every round, in alternating order, so a burst of load
		// (other processes on a shared machine) or a warm cache does not always favour the same side.
		if i%2 == 0 {
			r.kubectl = kubectlApply()
			r.pipeline = pipelineDeploy()
		} else {
			r.pipeline = pipelineDeploy()
			r.kubectl = kubectlApply()
		}
		before := resourceVersions(ctx, b, c, ns)
		if len(before) != manifests {
			b.Fatalf("pipeline applied %d objects, want %d", len(before), manifests)
		}

		// A push that changes no manifest: same tree, new commit. kubectl's counterpart, the same file applied
		// again, is measured next to it for reference.
		git(b, work, "commit", "-q", "--allow-empty", "-m", "no change")
		git(b, work, "push", "-q", bare, "main")
		sha2 := git(b, work, "rev-parse", "HEAD")
		stopProfile := profileNoChange(b, i)
		requests.reset()
		start := time.Now()
		deliver(b, p.WebhookURL(), ns, repoURL, sha2, []string{"deploy/cm-0000.yaml"})
		waitDone(ctx, b, c, ns, sha2)
		r.noChange = time.Since(start)
		r.noChangeRequests = requests.String()
		stopProfile()
		r.kubectlAgain = kubectlApply()
		after := resourceVersions(ctx, b, c, ns)
		for k, v := range after {
			if before[k] != v {
				r.written++
			}
		}
		if r.written != 0 {
			b.Fatalf("a no-change push wrote %d objects", r.written)
		}
		r.loadAfter = loadAverage()
		results = append(results, r)
		fmt.Printf("round %d (load %s → %s): kubectl %s, pipeline %s (%.2f×), no-change push %s (%.2f×; API requests %s), kubectl again %s\n",
			i+1, r.load, r.loadAfter, r.kubectl.Round(time.Millisecond), r.pipeline.Round(time.Millisecond),
			r.ratio(), r.noChange.Round(time.Millisecond), r.noChangeRatio(), r.noChangeRequests,
			r.kubectlAgain.Round(time.Millisecond))
		// Run the next round on a fresh commit.
		sha = sha2
	}
	report(b, results)
}
