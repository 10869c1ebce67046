package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// gitopsDemoNamespace is the tenant namespace of the make dev gitops demo.
const gitopsDemoNamespace = "gitops-demo"

const gitopsDemoManifest = `apiVersion: v1
kind: ConfigMap
metadata:
  name: hello
data:
  greeting: hello from katastroma
`

// startGitops runs the gitops pipeline all-in-one against the dev control plane with a local repository served by
// `git daemon` on loopback, a tenant namespace and a source target pointing at the repository's deploy/ path,
// and deploys it once with a Retrieve. It returns what to print and a stop function.
// gitDaemon is the git-daemon program itself: `git daemon` runs it as a child process, which outlives a killed
// `git` and would keep serving (and its port) after the test.
func gitDaemon() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-daemon"), nil
}

func startGitops(ctx context.Context, env *testenv.Env, dir string) (string, func(), error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", nil, fmt.Errorf("the gitops demo needs git: %w", err)
	}
	_ = os.RemoveAll(dir)
	bare, work := filepath.Join(dir, "srv", "demo.git"), filepath.Join(dir, "work")
	for _, d := range []string{bare, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, err
		}
	}
	gitCmd := func(d string, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@localhost",
			"GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Join(work, "deploy"), 0o755); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "deploy", "hello.yaml"), []byte(gitopsDemoManifest), 0o644); err != nil {
		return "", nil, err
	}
	for _, step := range [][]string{
		{bare, "init", "-q", "--bare", "-b", "main"}, {bare, "config", "uploadpack.allowReachableSHA1InWant", "true"},
		{work, "init", "-q", "-b", "main"}, {work, "remote", "add", "origin", bare}, {work, "add", "-A"},
		{work, "commit", "-q", "-m", "demo"}, {work, "push", "-q", "origin", "main"},
	} {
		if err := gitCmd(step[0], step[1:]...); err != nil {
			return "", nil, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	daemonBin, err := gitDaemon()
	if err != nil {
		return "", nil, err
	}
	daemon := exec.CommandContext(ctx, daemonBin, "--export-all", "--reuseaddr", "--listen=127.0.0.1",
		fmt.Sprintf("--port=%d", port), "--base-path="+filepath.Join(dir, "srv"), filepath.Join(dir, "srv"))
	if err := daemon.Start(); err != nil {
		return "", nil, err
	}
	stopDaemon := func() { _ = daemon.Process.Kill(); _ = daemon.Wait() }
	repoURL := fmt.Sprintf("git://127.0.0.1:%d/demo.git", port)
	if err := gitopsTenant(ctx, env.Client, repoURL); err != nil {
		stopDaemon()
		return "", nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	// The demo repository is served on loopback: the fetch guard refuses that unless told otherwise.
	p, err := runner.StartAll(pctx, runner.Options{HTTPAddr: "127.0.0.1:0", Config: env.Config,
		Scheme: operator.NewScheme(), RepositoryAllowForTesting: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err != nil {
		cancel()
		stopDaemon()
		return "", nil, err
	}
	stop := func() { cancel(); _ = p.Wait(); stopDaemon() }
	conn, err := stage.Dial(p.Stages[runner.Source].GRPCAddr)
	if err != nil {
		stop()
		return "", nil, err
	}
	defer func() { _ = conn.Close() }()
	// git daemon needs a moment to listen; retry the first Retrieve.
	var resp *katastromav1.RetrieveResponse
	for i := 0; i < 50; i++ {
		if resp, err = katastromav1.NewSourceHandlerServiceClient(conn).Retrieve(ctx,
			&katastromav1.RetrieveRequest{Namespace: gitopsDemoNamespace, SourceTarget: "demo"}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("retrieving the demo source target: %w", err)
	}
	info := fmt.Sprintf(`gitops: the katastroma pipeline runs all-in-one (event %s deploys %s/deploy).
  webhook:       %s/webhook/%s  (HMAC secret %q)
  source gRPC:   %s  (Retrieve / Replay)
  repository:    %s  (edit %s/deploy, commit and push, then Retrieve or post a signed push)
  bin/k8s/kubectl -n %s get configmaps -l %s
`, resp.GetEventId(), repoURL, p.WebhookURL(), gitopsDemoNamespace, "dev-secret",
		p.Stages[runner.Source].GRPCAddr, repoURL, work, gitopsDemoNamespace, pipeline.LabelTenant)
	return info, stop, nil
}

// gitopsTenant creates the demo tenant: namespace, webhook Secret, provisioner and pruner ServiceAccounts with
// write-only roles, and the source target ConfigMap.
func gitopsTenant(ctx context.Context, c client.Client, repoURL string) error {
	ns := gitopsDemoNamespace
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{pipeline.LabelTenant: "demo"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: source.WebhookSecretName},
			StringData: map[string]string{source.WebhookSecretKey: "dev-secret"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo",
			Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
			Data: map[string]string{"repo-url": repoURL, "ref": "main", "path": "deploy"}},
	}
	for sa, verbs := range map[string][]string{"provisioner": tenancy.ProvisionerVerbs, "pruner": tenancy.PrunerVerbs} {
		subj := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}
		objs = append(objs,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "secrets"}, Verbs: verbs},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: verbs}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}, Subjects: subj})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
