package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

const widget = `apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
`

// TestCRDAndCRInOneCommit: a commit holding a CRD and a custom resource of it applies in one event; the resource
// waits until the CRD is established and its kind resolves.
func TestCRDAndCRInOneCommit(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"},
		Resources: []string{"customresourcedefinitions"}})
	r := gitd.newRepo(t)
	// The custom resource sorts before the CRD by file name; the orderer puts the CRD first.
	sha, changed := r.commit(map[string]*string{"app/a-widget.yaml": s(widget), "app/z-crd.yaml": s(crd)})
	sourceTarget(ctx, ns, "crds", r, "app", "")
	eventID := accepted(t, ns, r.pushPayload(sha, changed))
	var root tracetest.SpanStub
	Eventually(func(g Gomega) {
		ev := named(traceSpans(eventID), "event")
		g.Expect(ev).To(HaveLen(1))
		root = ev[0]
	}, 3*time.Minute).Should(Succeed())
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "w1"}, w)).To(Succeed())
	Expect(w.GetAnnotations()).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
}
