package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
)

// saToken returns a token of the ServiceAccount "registrar" in ns (created if missing), issued by the API server
// for the given audiences (none: the API server's own).
func saToken(ctx context.Context, ns string, audiences ...string) string {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "registrar"}}
	if err := env.Client.Create(ctx, sa); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences}}
	Expect(env.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	return tr.Status.Token
}

// call makes one registration API request and returns the status and decoded body.
func call(method, path, token string, body any) (int, map[string]any) {
	var r bytes.Buffer
	if body != nil {
		Expect(json.NewEncoder(&r).Encode(body)).To(Succeed())
	}
	req, err := http.NewRequest(method, pipe.WebhookURL()+path, &r)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestRegistrationAPI(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	other := newTenant(ctx)
	holdTenant(ctx, ns)
	holdTenant(ctx, other)
	token := saToken(ctx, ns, source.DefaultRegistrationAudience)
	foreign := saToken(ctx, other, source.DefaultRegistrationAudience)
	// A namespace labelled for ns's tenant by someone who may create namespaces, but not in the Tenant's spec.
	smuggled := "smuggled-" + ns
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: smuggled,
		Labels: map[string]string{pipeline.LabelTenant: "team-" + ns[7:]}}})).To(Succeed())
	intruder := saToken(ctx, smuggled, source.DefaultRegistrationAudience)
	r := gitd.newRepo(t)
	sha, _ := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "registered")})
	base := "/api/v1/namespaces/" + ns + "/sourcetargets"
	reg := source.Registration{RepoURL: r.url, Ref: r.branch, Path: "deploy"}

	// Authentication and tenant isolation.
	code, _ := call(http.MethodPut, base+"/web", "", reg)
	Expect(code).To(Equal(http.StatusUnauthorized), "no token")
	code, _ = call(http.MethodPut, base+"/web", "not-a-token", reg)
	Expect(code).To(Equal(http.StatusUnauthorized), "a token the API server does not know")
	code, _ = call(http.MethodGet, base, saToken(ctx, ns), nil)
	Expect(code).To(Equal(http.StatusUnauthorized), "a token for the API server's audience, not the registration API's")
	code, _ = call(http.MethodGet, base, intruder, nil)
	Expect(code).To(Equal(http.StatusForbidden), "the label alone does not make a namespace the tenant's")
	code, body := call(http.MethodPut, base+"/web", foreign, reg)
	Expect(code).To(Equal(http.StatusForbidden), "another tenant's ServiceAccount: %v", body)
	code, _ = call(http.MethodGet, "/api/v1/namespaces/"+other+"/sourcetargets", token, nil)
	Expect(code).To(Equal(http.StatusForbidden), "and the other way round")
	_, err := getCM(ctx, ns, "web")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing stored for refused callers")

	// Bad input is refused with the field named, and nothing is stored.
	code, body = call(http.MethodPut, base+"/web", token, source.Registration{RepoURL: r.url, Path: "../x"})
	Expect(code).To(Equal(http.StatusUnprocessableEntity))
	Expect(body["error"]).To(And(ContainSubstring("ref: Required value"), ContainSubstring("path: Invalid value")))

	// Registered in exactly the format the stages read: a Retrieve deploys it.
	code, body = call(http.MethodPut, base+"/web", token, reg)
	Expect(code).To(Equal(http.StatusCreated), "%v", body)
	cm := mustCM(ctx, ns, "web")
	Expect(cm.Labels).To(HaveKeyWithValue(pipeline.LabelType, pipeline.TypeSourceTarget))
	tgt, err := source.TargetFromConfigMap(cm)
	Expect(err).NotTo(HaveOccurred())
	Expect(tgt.RepoURL).To(Equal(r.url))
	resp, err := sourceClient().Retrieve(ctx, &katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: "web"})
	Expect(err).NotTo(HaveOccurred())
	root := waitEvent(t, resp.GetEventId())
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))

	// Credentials never travel over a plaintext URL (the test's git daemon speaks git://).
	reg.Credentials = &source.Credentials{Type: source.CredBasicAuth, Username: "bot", Password: "s3cret"}
	code, body = call(http.MethodPut, base+"/web", token, reg)
	Expect(code).To(Equal(http.StatusUnprocessableEntity), "%v", body)
	Expect(body["error"]).To(ContainSubstring("credentials: Forbidden"))
	// Replacing it with credentials keeps the lease annotations and writes the credential Secret.
	reg.RepoURL = strings.Replace(r.url, "git://", "https://", 1)
	code, body = call(http.MethodPut, base+"/web", token, reg)
	Expect(code).To(Equal(http.StatusOK), "%v", body)
	cm = mustCM(ctx, ns, "web")
	Expect(cm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCredentials, "web-credentials"))
	Expect(cm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationEventID, resp.GetEventId()))
	secret := &corev1.Secret{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-credentials"}, secret)).To(Succeed())
	Expect(secret.Data).To(HaveKeyWithValue("type", []byte("basic-auth")))
	Expect(secret.Data).To(HaveKeyWithValue("password", []byte("s3cret")))

	code, body = call(http.MethodGet, base, token, nil)
	Expect(code).To(Equal(http.StatusOK))
	Expect(body["items"]).To(ConsistOf(And(HaveKeyWithValue("name", "web"), HaveKeyWithValue("lastResult", "succeeded"),
		HaveKeyWithValue("credentialSecret", "web-credentials"))))
	Expect(body["items"]).NotTo(ContainElement(HaveKey("password")), "credentials are never listed")

	// A ConfigMap that is not a source target cannot be taken over or deleted through the API.
	code, _ = call(http.MethodPut, base+"/a", token, source.Registration{RepoURL: r.url, Ref: "main"})
	Expect(code).To(Equal(http.StatusConflict))
	code, _ = call(http.MethodDelete, base+"/a", token, nil)
	Expect(code).To(Equal(http.StatusNotFound))
	// Nor can an application's Secret that happens to have a credential Secret's name.
	Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-credentials"},
		StringData: map[string]string{"k": "v"}})).To(Succeed())
	code, _ = call(http.MethodPut, base+"/app", token, reg)
	Expect(code).To(Equal(http.StatusConflict))
	appSecret := &corev1.Secret{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "app-credentials"}, appSecret)).To(Succeed())
	Expect(appSecret.Data).To(Equal(map[string][]byte{"k": []byte("v")}))

	code, _ = call(http.MethodDelete, base+"/web", token, nil)
	Expect(code).To(Equal(http.StatusNoContent))
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-credentials"}, &corev1.Secret{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue())
	// The target goes once what it deployed is pruned (its finalizer; docs/gitops.md).
	Eventually(func(g Gomega) {
		for _, name := range []string{"a", "web"} {
			_, err := getCM(ctx, ns, name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s still exists (err %v)", name, err)
		}
	}, 30*time.Second).Should(Succeed())
}

// holdTenant creates the Tenant newTenant's label names, listing ns: the registration API authorises against it.
// The e2e environment runs no manager, so the Tenant admission webhook is taken out of the way first.
func holdTenant(ctx context.Context, ns string) {
	cfgs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	Expect(env.Client.List(ctx, cfgs)).To(Succeed())
	for i := range cfgs.Items {
		cfg := &cfgs.Items[i]
		kept := slices.DeleteFunc(slices.Clone(cfg.Webhooks), func(w admissionregistrationv1.ValidatingWebhook) bool {
			return w.Name == "vtenant-v1alpha1.katastroma.org"
		})
		if len(kept) != len(cfg.Webhooks) {
			cfg.Webhooks = kept
			Expect(env.Client.Update(ctx, cfg)).To(Succeed())
		}
	}
	Eventually(func() error {
		return env.Client.Create(ctx, &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-" + ns[7:]},
			Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{ns}}})
	}).Should(Succeed())
}
