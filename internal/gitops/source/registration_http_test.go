package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
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
func reviewer(_ context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
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
		ns("a-dev", "team-a"), ns("a-prod", "team-a"),
		// Created by someone allowed to create namespaces, labelled for team-a, but not in team-a's spec.
		ns("smuggled", "team-a"),
		&gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
			Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{"a-dev", "a-prod"}}},
	).Build()
	mux := http.NewServeMux()
	(&Handler{Client: c}).registerRoutes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for name, tc := range map[string]struct {
		token, target string
		want          int
	}{
		"same tenant":                     {"a-dev/" + DefaultRegistrationAudience, "a-prod", http.StatusOK},
		"own namespace":                   {"a-prod/" + DefaultRegistrationAudience, "a-prod", http.StatusOK},
		"token for another audience":      {"a-dev/https://kubernetes.default.svc", "a-prod", http.StatusUnauthorized},
		"caller labelled, not in spec":    {"smuggled/" + DefaultRegistrationAudience, "a-prod", http.StatusForbidden},
		"target labelled, not in spec":    {"a-dev/" + DefaultRegistrationAudience, "smuggled", http.StatusForbidden},
		"unlabelled or missing namespace": {"a-dev/" + DefaultRegistrationAudience, "elsewhere", http.StatusForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/"+tc.target+"/sourcetargets", nil)
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
	req.Header.Set("Authorization", "Bearer a-dev/"+DefaultRegistrationAudience)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
}
