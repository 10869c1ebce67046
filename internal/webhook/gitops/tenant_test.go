package gitops

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

func nsRaw(t *testing.T, labels map[string]string) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: labels}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return runtime.RawExtension{Raw: b}
}

func TestNamespaceGuard(t *testing.T) {
	tenant := func(v string) map[string]string { return map[string]string{gitopsv1alpha1.LabelTenant: v} }
	for name, tc := range map[string]struct {
		op       admissionv1.Operation
		old, new map[string]string
		allowed  bool
		message  string
	}{
		"label added":        {admissionv1.Update, nil, tenant("a"), true, ""},
		"unchanged":          {admissionv1.Update, tenant("a"), tenant("a"), true, ""},
		"other label change": {admissionv1.Update, tenant("a"), map[string]string{gitopsv1alpha1.LabelTenant: "a", "x": "y"}, true, ""},
		"changed":            {admissionv1.Update, tenant("a"), tenant("b"), false, "metadata.labels[katastroma.org/tenant]: Forbidden: is immutable: it cannot change from a to b"},
		"removed":            {admissionv1.Update, tenant("a"), nil, false, "it cannot be removed"},
		"delete passes":      {admissionv1.Delete, tenant("a"), nil, true, ""},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: tc.op,
				OldObject: nsRaw(t, tc.old), Object: nsRaw(t, tc.new)}}
			resp := NamespaceGuard{}.Handle(context.Background(), req)
			g.Expect(resp.Allowed).To(Equal(tc.allowed), "%v", resp.Result)
			if tc.message != "" {
				g.Expect(resp.Result.Message).To(ContainSubstring(tc.message))
			}
		})
	}
	// Removal is allowed once the Tenant no longer lists the namespace (the controller releasing an adopted one).
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(gitopsv1alpha1.AddToScheme(scheme)).To(Succeed())
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "holds"}, Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{"a"}}},
		&gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "left"}, Spec: gitopsv1alpha1.TenantSpec{Namespaces: []string{"b"}}},
	).Build()
	for tenantName, allowed := range map[string]bool{"holds": false, "left": true, "gone": true} {
		resp := NamespaceGuard{Reader: reader}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, OldObject: nsRaw(t, tenant(tenantName)), Object: nsRaw(t, nil)}})
		g.Expect(resp.Allowed).To(Equal(allowed), "tenant %s: %v", tenantName, resp.Result)
	}
	resp := NamespaceGuard{}.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update}})
	g.Expect(resp.Allowed).To(BeFalse(), "an update without objects is an error, not a pass")
}
