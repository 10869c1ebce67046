package gnmic

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// TestReconcileWritesStatusOnlyOnChange counts status patches: the first reconcile writes, a second one with
// nothing new sends no request, a new referencing Pipeline writes again.
func TestReconcileWritesStatusOnlyOnChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sub := &gnmicv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ifaces", Generation: 1, Labels: map[string]string{"set": "base"}},
		Spec:       gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/interfaces"}},
	}
	byRef := &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b-ref"},
		Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "c", SubscriptionRefs: []string{"ifaces", "other"}}}
	unrelated := &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-unrelated"},
		Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "c", SubscriptionSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"set": "x"}}}}}
	otherNamespace := &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "a"},
		Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "c", SubscriptionRefs: []string{"ifaces"}}}
	kind := collectorResourceKinds[0]
	g.Expect(kind.kind).To(Equal("Subscription"))

	scheme := runtime.NewScheme()
	g.Expect(gnmicv1alpha1.AddToScheme(scheme)).To(Succeed())
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(sub, byRef, unrelated, otherNamespace).
		WithStatusSubresource(&gnmicv1alpha1.Subscription{}).
		WithIndex(&gnmicv1alpha1.GnmicPipeline{}, pipelineRefsIxPrefix+kind.kind, pipelineReferenceIndex(kind.kind)).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	r := &CollectorResourceReconciler{Client: c, kind: kind}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sub)}

	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patches).To(Equal(1))
	got := &gnmicv1alpha1.Subscription{}
	g.Expect(c.Get(ctx, req.NamespacedName, got)).To(Succeed())
	g.Expect(got.Status.Pipelines).To(Equal([]string{"b-ref"}))
	g.Expect(got.Status.ObservedGeneration).To(BeEquivalentTo(1))
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, gnmicv1alpha1.CollectorResourceConditionReady)).To(BeTrue())

	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patches).To(Equal(1), "a reconcile with nothing new wrote status")

	g.Expect(c.Create(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-sel"},
		Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "c", SubscriptionSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"set": "base"}}}}})).To(Succeed())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patches).To(Equal(2))
	g.Expect(c.Get(ctx, req.NamespacedName, got)).To(Succeed())
	g.Expect(got.Status.Pipelines).To(Equal([]string{"a-sel", "b-ref"}))
}

// TestReadyCondition is the table of the Ready condition: valid specs are Ready, invalid ones carry the field.
func TestReadyCondition(t *testing.T) {
	for name, tc := range map[string]struct {
		errs       field.ErrorList
		wantStatus metav1.ConditionStatus
		wantReason string
		wantText   string
	}{
		"valid":   {nil, metav1.ConditionTrue, gnmicv1alpha1.ReasonValid, "valid"},
		"invalid": {field.ErrorList{field.Required(field.NewPath("spec", "paths"), "a path is needed")}, metav1.ConditionFalse, gnmicv1alpha1.ReasonInvalid, "spec.paths"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := readyCondition(tc.errs, 7)
			g.Expect(c.Status).To(Equal(tc.wantStatus))
			g.Expect(c.Reason).To(Equal(tc.wantReason))
			g.Expect(c.Message).To(ContainSubstring(tc.wantText))
			g.Expect(c.ObservedGeneration).To(BeEquivalentTo(7))
		})
	}
}

// TestReadyConditionReportsTheKindsValidation: an invalid object of each kind (as one admitted before a webhook rule
// existed would be) is reported with its kind's own validation.
func TestReadyConditionReportsTheKindsValidation(t *testing.T) {
	invalid := map[string]client.Object{
		"Subscription":       &gnmicv1alpha1.Subscription{},
		"Output":             &gnmicv1alpha1.Output{},
		"Input":              &gnmicv1alpha1.Input{},
		"Processor":          &gnmicv1alpha1.Processor{},
		"TunnelTargetPolicy": &gnmicv1alpha1.TunnelTargetPolicy{Spec: gnmicv1alpha1.TunnelTargetPolicySpec{Match: &gnmicv1alpha1.TunnelTargetMatch{Type: "("}}},
	}
	g := NewWithT(t)
	g.Expect(collectorResourceKinds).To(HaveLen(len(invalid)))
	for _, k := range collectorResourceKinds {
		t.Run(k.kind, func(t *testing.T) {
			g := NewWithT(t)
			c := readyCondition(k.validate(invalid[k.kind]), 1)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "an empty %s passed validation", k.kind)
			g.Expect(c.Message).To(ContainSubstring("spec."))
		})
	}
}

// TestSelectsLabels: an empty selector matches nothing, as in Pipeline resolution.
func TestSelectsLabels(t *testing.T) {
	set := map[string]string{"a": "1"}
	for name, tc := range map[string]struct {
		selectors []metav1.LabelSelector
		want      bool
	}{
		"none":           {nil, false},
		"empty selector": {[]metav1.LabelSelector{{}}, false},
		"matching":       {[]metav1.LabelSelector{{MatchLabels: map[string]string{"a": "1"}}}, true},
		"not matching":   {[]metav1.LabelSelector{{MatchLabels: map[string]string{"a": "2"}}}, false},
		"second matches": {[]metav1.LabelSelector{{MatchLabels: map[string]string{"b": "1"}}, {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}}}, true},
		"invalid":        {[]metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Nope"}}}}, false},
	} {
		t.Run(name, func(t *testing.T) { NewWithT(t).Expect(selectsLabels(tc.selectors, set)).To(Equal(tc.want)) })
	}
}
