package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// reviewer answers TokenReviews the way the API server does: token "<namespace>/<audience>" authenticates a
// ServiceAccount of that namespace, valid for the requested audiences only when they include <audience>.
// SubjectAccessReviews are allowed for the ServiceAccounts of namespace a-ops only (an administrator granted them
// sourcetargets.katastroma.org in team-a's namespaces, except deleting the target named "guarded"), and only with
// the caller's groups passed along.
func reviewer(_ context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
		a := sar.Spec.ResourceAttributes
		sar.Status.Allowed = strings.HasPrefix(sar.Spec.User, "system:serviceaccount:a-ops:") &&
			slices.Contains(sar.Spec.Groups, "system:serviceaccounts") && a != nil &&
			a.Group == "katastroma.org" && a.Resource == "sourcetargets" && a.Namespace != "" &&
			(a.Verb != "delete" || a.Name != "guarded")
		return nil
	}
	tr, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return c.Create(context.Background(), obj, opts...)
	}
	for i := range len(tr.Spec.Token) {
		if tr.Spec.Token[i] != '/' {
			continue
		}
		ns, aud := tr.Spec.Token[:i], tr.Spec.Token[i+1:]
		tr.Status.User.Username = "system:serviceaccount:" + ns + ":registrar"
		tr.Status.User.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
		if slices.Contains(tr.Spec.Audiences, aud) {
			tr.Status.Authenticated = true
			tr.Status.Audiences = []string{aud}
		}
	}
	return nil
}

func TestRegistrationAuthorization(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	NewWithT(t).Expect(gitopsv1alpha1.AddToScheme(scheme)).To(Succeed())
	ns := func(name, tenant string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pipeline.LabelTenant: tenant}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{Create: reviewer}).WithObjects(
		ns("a-dev", "team-a"), ns("a-prod", "team-a"), ns("a-ops", "team-a"),
		// Created by someone allowed to create namespaces, labelled for team-a, but not in team-a's spec.
		ns("smuggled", "team-a"),
		&gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
			Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{"a-dev", "a-prod", "a-ops"}}},
	).Build()
	mux := http.NewServeMux()
	(&Handler{Client: c}).registerRoutes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for name, tc := range map[string]struct {
		method, token, target string
		want                  int
	}{
		// Another namespace of the same tenant is not enough: dev's ServiceAccount cannot list, replace or delete
		// prod's targets (a delete prunes everything the target deployed) without a right in prod.
		"dev lists prod's targets":        {http.MethodGet, "a-dev/" + DefaultRegistrationAudience, "a-prod", http.StatusForbidden},
		"dev replaces prod's target":      {http.MethodPut, "a-dev/" + DefaultRegistrationAudience, "a-prod", http.StatusForbidden},
		"dev deletes prod's target":       {http.MethodDelete, "a-dev/" + DefaultRegistrationAudience, "a-prod", http.StatusForbidden},
		"granted in prod":                 {http.MethodGet, "a-ops/" + DefaultRegistrationAudience, "a-prod", http.StatusOK},
		"own namespace":                   {http.MethodGet, "a-prod/" + DefaultRegistrationAudience, "a-prod", http.StatusOK},
		"token for another audience":      {http.MethodGet, "a-ops/https://kubernetes.default.svc", "a-prod", http.StatusUnauthorized},
		"caller labelled, not in spec":    {http.MethodGet, "smuggled/" + DefaultRegistrationAudience, "a-prod", http.StatusForbidden},
		"target labelled, not in spec":    {http.MethodGet, "a-ops/" + DefaultRegistrationAudience, "smuggled", http.StatusForbidden},
		"unlabelled or missing namespace": {http.MethodGet, "a-ops/" + DefaultRegistrationAudience, "elsewhere", http.StatusForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			url := srv.URL + "/api/v1/namespaces/" + tc.target + "/sourcetargets"
			if tc.method != http.MethodGet {
				url += "/app"
			}
			req, err := http.NewRequest(tc.method, url, strings.NewReader(`{"repoURL":"https://github.com/org/app.git","ref":"refs/heads/main","path":"deploy"}`))
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			g.Expect(resp.StatusCode).To(Equal(tc.want))
		})
	}

	// A deleted Tenant no longer authorises.
	g := NewWithT(t)
	g.Expect(c.Delete(context.Background(), &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})).To(Succeed())
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/a-prod/sourcetargets", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer a-ops/"+DefaultRegistrationAudience)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
}
