package provisioner

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestVerifyOfUnchangedObjectsListsNothingAgain: a push that wrote nothing is verified from the live objects its
// apply listed in the same event, without a second list of every object; a written object is read again.
func TestVerifyOfUnchangedObjectsListsNothingAgain(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web",
		Annotations: map[string]string{pipeline.AnnotationLeaseID: pipeline.LeaseRef("lease")}}}
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a",
		Labels: map[string]string{pipeline.LabelSourceTarget: "team.web"}}}
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(target, live).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			lists.Add(1)
			return c.List(ctx, l, opts...)
		}}).Build()
	liveU := &unstructured.Unstructured{}
	liveU.SetAPIVersion("v1")
	liveU.SetKind("ConfigMap")
	liveU.SetNamespace("team")
	liveU.SetName("a")
	liveU.SetLabels(map[string]string{pipeline.LabelSourceTarget: "team.web"})
	verifyWith := func(action string) {
		ref := &katastromav1.ObjectRef{ApiVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: "a"}
		a := &applier{clients: &Clients{Platform: c}, as: c, targetLabel: "team.web",
			pc:      pipeline.Context{Namespace: "team", SourceTarget: "web", LeaseID: "lease"},
			results: []*katastromav1.ObjectResult{{Object: ref, Action: action}}, applied: []*katastromav1.ObjectRef{ref},
			live: map[liveKey]map[string]*unstructured.Unstructured{
				{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, namespace: "team"}: {"a": liveU}}}
		g.Expect(a.verify(context.Background(), noop.Span{}, time.Second, 10*time.Millisecond)).To(Succeed())
	}
	verifyWith(ActionUnchanged)
	g.Expect(lists.Load()).To(BeZero(), "the verify listed the unchanged objects again")
	verifyWith(ActionApplied)
	g.Expect(lists.Load()).To(BeEquivalentTo(1), "a written object is read again")
}
