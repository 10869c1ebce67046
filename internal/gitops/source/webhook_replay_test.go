package source

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestWebhookRefusesReplaysAndOversizedBodies: a signed delivery is acted on once — the same delivery ID, or the
// same signed body under a new ID (the ID is not signed), is acknowledged and ignored; a body over the bound is
// refused with 413 before any signature check.
func TestWebhookRefusesReplaysAndOversizedBodies(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	secret := []byte("s3cret")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: WebhookSecretName},
		Data:       map[string][]byte{WebhookSecretKey: secret}}).Build()
	h := &Handler{Client: c, localRepositories: true}
	mux := h.Mux()
	deliver := func(id string, body []byte) (int, map[string]any) {
		req := httptest.NewRequest(http.MethodPost, "/webhook/team", strings.NewReader(string(body)))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		out := map[string]any{}
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	body := []byte(samplePush)
	code, out := deliver("d-1", body)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(out["reason"]).To(Equal("no source target matches"), "the first delivery is handled")
	code, out = deliver("d-1", body)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(out["reason"]).To(ContainSubstring("already received"), "the same delivery again")
	code, out = deliver("d-2", body)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(out["reason"]).To(ContainSubstring("already received"), "the same signed body under a new delivery ID")

	big := make([]byte, maxBody+1)
	code, _ = deliver("d-3", big)
	g.Expect(code).To(Equal(http.StatusRequestEntityTooLarge))
}

// localRepo makes a repository with two commits on main in a temporary directory and returns its file:// URL and
// the two commits, oldest first.
func localRepo(t *testing.T) (url string, commits []string) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	g.Expect(err).NotTo(HaveOccurred())
	wt, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.MkdirAll(filepath.Join(dir, "deploy"), 0o755)).To(Succeed())
	for i := range 2 {
		g.Expect(os.WriteFile(filepath.Join(dir, "deploy", "cm.yaml"), []byte(fmt.Sprintf("# version %d\n", i)), 0o644)).To(Succeed())
		_, err = wt.Add("deploy/cm.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		sha, err := wt.Commit(fmt.Sprintf("v%d", i), &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}})
		g.Expect(err).NotTo(HaveOccurred())
		commits = append(commits, sha.String())
	}
	head, err := repo.Head()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(head.Name().String()).To(Equal("refs/heads/master"))
	return "file://" + dir, commits
}

// TestWebhookDeploysOnlyTheHeadOfTheRef: a signed push whose commit is no longer the head of its ref (a captured
// delivery replayed after a restart emptied the delivery memory, or an older push arriving late) deploys nothing
// and takes no lease: the ref's current head is what gets deployed, by the push that made it so or by a poll.
func TestWebhookDeploysOnlyTheHeadOfTheRef(t *testing.T) {
	g := NewWithT(t)
	url, commits := localRepo(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	secret := []byte("s3cret")
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web",
		Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
		Data: map[string]string{"repo-url": url, "ref": "master", "path": "deploy"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: WebhookSecretName},
		Data:       map[string][]byte{WebhookSecretKey: secret}}, target).Build()
	h := &Handler{Client: c, localRepositories: true}
	body := []byte(fmt.Sprintf(`{"ref":"refs/heads/master","before":"0000000000000000000000000000000000000000","after":%q,
"forced":true,"repository":{"clone_url":%q}}`, commits[0], url))
	req := httptest.NewRequest(http.MethodPost, "/webhook/team", strings.NewReader(string(body)))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "old")
	req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	rec := httptest.NewRecorder()
	h.Mux().ServeHTTP(rec, req)
	g.Expect(rec.Code).To(Equal(http.StatusOK), rec.Body.String())
	g.Expect(rec.Body.String()).To(ContainSubstring("not the head of refs/heads/master"))
	got := &corev1.ConfigMap{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(target), got)).To(Succeed())
	g.Expect(got.Annotations).NotTo(HaveKey(pipeline.AnnotationLeaseID), "no lease taken")
}
