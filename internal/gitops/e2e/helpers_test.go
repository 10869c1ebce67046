package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

const webhookSecret = "t0p-s3cret"

// gitServer serves bare repositories under a directory with `git daemon` on loopback.
type gitServer struct {
	base string
	port int
	cmd  *exec.Cmd
	log  *syncBuffer
}

// syncBuffer is the daemon's log, written by its process and read by tests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// uploadPacks counts the fetches and ref listings (upload-pack requests) the daemon served for r.
func (s *gitServer) uploadPacks(r *repo) int {
	name := r.url[strings.LastIndex(r.url, "/"):]
	n := 0
	for _, line := range strings.Split(s.log.String(), "\n") {
		if strings.Contains(line, "upload-pack") && strings.Contains(line, name+"'") {
			n++
		}
	}
	return n
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
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

func startGitDaemon() (*gitServer, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("git is required for the gitops tests: %w", err)
	}
	base, err := os.MkdirTemp("", "katastroma-git-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	daemon, err := gitDaemon()
	if err != nil {
		return nil, err
	}
	// --verbose logs each request, so a test can count the fetches (gitServer.uploadPacks).
	cmd := exec.Command(daemon, "--export-all", "--reuseaddr", "--listen=127.0.0.1", "--verbose",
		"--log-destination=stderr", fmt.Sprintf("--port=%d", port), "--base-path="+base, base)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = nil, log
	if os.Getenv("QUARTET_TEST_LOGS") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, io.MultiWriter(os.Stderr, log)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &gitServer{base: base, port: port, cmd: cmd, log: log}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("git daemon did not listen on %d", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *gitServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	_ = os.RemoveAll(s.base)
}

// repo is a bare repository served by the daemon plus a working clone the test commits in.
type repo struct {
	t      testing.TB
	url    string
	work   string
	branch string
	mu     sync.Mutex
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (s *gitServer) newRepo(t testing.TB) *repo {
	name := "r-" + rand.String(6) + ".git"
	bare := filepath.Join(s.base, name)
	git(t, s.base, "init", "-q", "--bare", "-b", "main", bare)
	git(t, bare, "config", "uploadpack.allowReachableSHA1InWant", "true")
	git(t, bare, "config", "uploadpack.allowAnySHA1InWant", "true")
	work := t.TempDir()
	git(t, work, "init", "-q", "-b", "main")
	git(t, work, "remote", "add", "origin", bare)
	return &repo{t: t, url: fmt.Sprintf("git://127.0.0.1:%d/%s", s.port, name), work: work, branch: "main"}
}

// commit writes (or, with a nil value, removes) files, commits, pushes and returns the SHA and changed paths.
func (r *repo) commit(files map[string]*string) (string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []string
	for p, content := range files {
		full := filepath.Join(r.work, p)
		if content == nil {
			Expect(os.Remove(full)).To(Succeed())
		} else {
			Expect(os.MkdirAll(filepath.Dir(full), 0o755)).To(Succeed())
			Expect(os.WriteFile(full, []byte(*content), 0o644)).To(Succeed())
		}
		changed = append(changed, p)
	}
	git(r.t, r.work, "add", "-A")
	git(r.t, r.work, "commit", "-q", "--allow-empty", "-m", "change")
	git(r.t, r.work, "push", "-q", "origin", "HEAD:"+r.branch)
	return git(r.t, r.work, "rev-parse", "HEAD"), changed
}

func s(v string) *string { return &v }

// pushPayload is a GitHub push event body.
func (r *repo) pushPayload(sha string, changed []string) []byte {
	b, err := json.Marshal(map[string]any{
		"ref": "refs/heads/" + r.branch, "before": strings.Repeat("0", 40), "after": sha, "deleted": false,
		"repository":  map[string]any{"clone_url": r.url, "html_url": r.url, "full_name": "org/repo"},
		"commits":     []map[string]any{{"id": sha, "added": changed, "removed": []string{}, "modified": []string{}}},
		"head_commit": map[string]any{"id": sha},
	})
	Expect(err).NotTo(HaveOccurred())
	return b
}

var deliveries atomic.Int64

// deliver posts a signed push and returns the status and decoded body.
func deliver(url, ns string, body []byte, secret string, event string) (int, map[string]any) {
	req, err := http.NewRequest(http.MethodPost, url+"/webhook/"+ns, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("delivery-%d", deliveries.Add(1)))
	req.Header.Set("X-Hub-Signature-256", source.Sign([]byte(secret), body))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// newTenant creates a tenant namespace with the webhook Secret and the provisioner and pruner ServiceAccounts, bound
// to the roles a Tenant grants in that namespace (plus extra cluster rules when given).
func newTenant(ctx context.Context, clusterRules ...rbacv1.PolicyRule) string {
	ns := "tenant-" + rand.String(6)
	c := env.Client
	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{pipeline.LabelTenant: "team-" + ns[7:]}}})).To(Succeed())
	Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: source.WebhookSecretName},
		Data: map[string][]byte{source.WebhookSecretKey: []byte(webhookSecret)}})).To(Succeed())
	resources := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "secrets", "serviceaccounts"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
		{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}},
		{APIGroups: []string{"example.org"}, Resources: []string{"gadgets"}},
		{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}},
	}
	for sa, verbs := range map[string][]string{"provisioner": tenancy.ProvisionerVerbs, "pruner": tenancy.PrunerVerbs} {
		Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
		var rules []rbacv1.PolicyRule
		for _, r := range resources {
			r.Verbs = verbs
			rules = append(rules, r)
		}
		Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}, Rules: rules})).To(Succeed())
		subj := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}
		Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa}, Subjects: subj})).To(Succeed())
		if len(clusterRules) > 0 {
			var cr []rbacv1.PolicyRule
			for _, r := range clusterRules {
				r.Verbs = verbs
				cr = append(cr, r)
			}
			name := ns + "-" + sa
			Expect(c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cr})).To(Succeed())
			Expect(c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subj})).To(Succeed())
		}
	}
	return ns
}

// sourceTarget registers a source target ConfigMap, with its Helm overrides in a Secret when given.
func sourceTarget(ctx context.Context, ns, name string, r *repo, path, overrides string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
		Data: map[string]string{"repo-url": r.url, "ref": r.branch, "path": path}}
	if overrides != "" {
		secret := name + "-values"
		Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret,
			Labels: map[string]string{pipeline.LabelSourceTarget: name}},
			Data: map[string][]byte{source.OverridesKey: []byte(overrides)}})).To(Succeed())
		cm.Annotations = map[string]string{source.AnnotationOverridesSecret: secret}
	}
	Expect(env.Client.Create(ctx, cm)).To(Succeed())
}

func configMapYAML(name, ns, value string) *string {
	nsLine := ""
	if ns != "" {
		nsLine = "\n  namespace: " + ns
	}
	return s(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s%s\ndata:\n  value: %q\n", name, nsLine, value))
}

type sourceTargetT = source.Target
