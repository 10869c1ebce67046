package source

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestRegistrationRenamedFromAndClaimConflict: the registration API takes renamedFrom (stored as
// katastroma.org/renamed-from) under the same authorisation as the rest of the API, and lists the rename, the
// claim conflict the provisioner reported and the Platform that serves the target.
func TestRegistrationRenamedFromAndClaimConflict(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(gitopsv1alpha1.AddToScheme(scheme)).To(Succeed())
	ns := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pipeline.LabelTenant: "team-a"}}}
	}
	target := func(ns, name string, annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations,
			Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
			Data: map[string]string{"repo-url": "https://github.com/org/app.git", "ref": "main", "path": "deploy"}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{Create: reviewer}).WithObjects(
		ns("a-dev"), ns("a-prod"), ns("a-ops"),
		&gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
			Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{"a-dev", "a-prod", "a-ops"}}},
		target("a-prod", "old", nil), target("a-prod", "guarded", nil), target("a-dev", "devs", nil),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a-prod", Name: "settings"}},
		target("a-prod", "shared", map[string]string{pipeline.AnnotationClaimConflict: "ConfigMap a-prod/x: source target a-prod/old declares it too"}),
	).Build()
	mux := http.NewServeMux()
	(&Handler{Client: c, Lease: LeaseConfig{Platform: "katastroma-system/main"}}).registerRoutes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	put := func(caller, ns, name, renamedFrom string) (int, map[string]any) {
		body := `{"repoURL":"https://github.com/org/app.git","ref":"main","path":"deploy2","renamedFrom":"` + renamedFrom + `"}`
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/api/v1/namespaces/"+ns+"/sourcetargets/"+name, strings.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+caller+"/"+DefaultRegistrationAudience)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	renamedFrom := func(name string) string {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), types.NamespacedName{Namespace: "a-prod", Name: name}, cm)).To(Succeed())
		return cm.Annotations[pipeline.AnnotationRenamedFrom]
	}

	// In its own namespace a ServiceAccount renames freely; the target is stored with the annotation the stages
	// read, pinned to this Platform, and the answer says so.
	code, body := put("a-prod", "a-prod", "new", "old")
	g.Expect(code).To(Equal(http.StatusCreated), "%v", body)
	g.Expect(body).To(And(HaveKeyWithValue("renamedFrom", "old"), HaveKeyWithValue("servedBy", "katastroma-system/main")))
	g.Expect(renamedFrom("new")).To(Equal("old"))

	// Refusals name the field and store nothing.
	for name, tc := range map[string]struct {
		caller, renamedFrom string
		want                int
		says                string
	}{
		"another namespace's target":           {"a-prod", "a-dev/devs", http.StatusUnprocessableEntity, "renamedFrom: Invalid value"},
		"no such target":                       {"a-prod", "missing", http.StatusUnprocessableEntity, "renamedFrom: Not found"},
		"a ConfigMap that is no source target": {"a-prod", "settings", http.StatusUnprocessableEntity, "renamedFrom: Not found"},
		"itself":                               {"a-prod", "next", http.StatusUnprocessableEntity, "renamedFrom: Invalid value"},
		// a-ops may update any target in a-prod, but not delete "guarded": taking it over needs that right.
		"no right to delete the predecessor": {"a-ops", "guarded", http.StatusForbidden, "renamedFrom: system:serviceaccount:a-ops:registrar may not delete"},
		// a-dev holds no right in a-prod at all (the API's own check).
		"another namespace of the tenant": {"a-dev", "old", http.StatusForbidden, "may not update"},
	} {
		code, body := put(tc.caller, "a-prod", "next", tc.renamedFrom)
		g.Expect(code).To(Equal(tc.want), "%s: %v", name, body)
		g.Expect(body["error"]).To(ContainSubstring(tc.says), name)
		err := c.Get(context.Background(), types.NamespacedName{Namespace: "a-prod", Name: "next"}, &corev1.ConfigMap{})
		g.Expect(err).To(HaveOccurred(), "%s: nothing stored", name)
	}
	// Granted the right in a-prod, a-ops renames there.
	code, body = put("a-ops", "a-prod", "next", "old")
	g.Expect(code).To(Equal(http.StatusCreated), "%v", body)
	g.Expect(renamedFrom("next")).To(Equal("old"))
	// Sent again without renamedFrom, the registration replaces the target without it.
	code, body = put("a-prod", "a-prod", "next", "")
	g.Expect(code).To(Equal(http.StatusOK), "%v", body)
	g.Expect(renamedFrom("next")).To(BeEmpty())

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/a-prod/sourcetargets", nil)
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer a-prod/"+DefaultRegistrationAudience)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var list struct{ Items []RegisteredTarget }
	g.Expect(json.NewDecoder(resp.Body).Decode(&list)).To(Succeed())
	g.Expect(list.Items).To(ContainElements(
		And(HaveField("Name", "new"), HaveField("RenamedFrom", "old"), HaveField("ServedBy", "katastroma-system/main")),
		And(HaveField("Name", "shared"), HaveField("ClaimConflict", ContainSubstring("a-prod/old declares it too")),
			HaveField("ServedBy", "")),
	))
}
