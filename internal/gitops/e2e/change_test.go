package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

func hpaYAML(apiVersion string, maxReplicas int) *string {
	return s(fmt.Sprintf(`apiVersion: %s
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: %d
`, apiVersion, maxReplicas))
}

// gadgetCRD serves two versions without conversion: an object reads the same under both.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.org
spec:
  group: example.org
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

func gadgetYAML(version string, size int) *string {
	return s(fmt.Sprintf("apiVersion: example.org/%s\nkind: Gadget\nmetadata:\n  name: g1\nspec:\n  size: %d\n",
		version, size))
}

func getObj(ctx context.Context, apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)
}

func deployOK(t *testing.T, ns string, r *repo, files map[string]*string) string {
	t.Helper()
	sha, changed := r.commit(files)
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	return sha
}

// TestAPIVersionChangeAppliesInPlace: moving an object to another version of its kind (autoscaling/v1 → v2, a
// CRD's v1alpha1 → v1) updates the same object; it is never pruned.
func TestAPIVersionChangeAppliesInPlace(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"},
		Resources: []string{"customresourcedefinitions"}})
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "app", "")
	deployOK(t, ns, r, map[string]*string{"app/hpa.yaml": hpaYAML("autoscaling/v1", 3),
		"app/crd.yaml": s(gadgetCRD), "app/gadget.yaml": gadgetYAML("v1alpha1", 1)})
	hpa, err := getObj(ctx, "autoscaling/v2", "HorizontalPodAutoscaler", ns, "web")
	Expect(err).NotTo(HaveOccurred())
	g1, err := getObj(ctx, "example.org/v1", "Gadget", ns, "g1")
	Expect(err).NotTo(HaveOccurred())

	sha := deployOK(t, ns, r, map[string]*string{"app/hpa.yaml": hpaYAML("autoscaling/v2", 5),
		"app/gadget.yaml": gadgetYAML("v1", 2)})
	after, err := getObj(ctx, "autoscaling/v2", "HorizontalPodAutoscaler", ns, "web")
	Expect(err).NotTo(HaveOccurred(), "the HPA was pruned after its apiVersion changed")
	Expect(after.GetUID()).To(Equal(hpa.GetUID()))
	Expect(after.GetAnnotations()).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
	Expect(after.Object["spec"]).To(HaveKeyWithValue("maxReplicas", BeEquivalentTo(5)))
	g2, err := getObj(ctx, "example.org/v1", "Gadget", ns, "g1")
	Expect(err).NotTo(HaveOccurred(), "the custom resource was pruned after its apiVersion changed")
	Expect(g2.GetUID()).To(Equal(g1.GetUID()))
	Expect(g2.Object["spec"]).To(HaveKeyWithValue("size", BeEquivalentTo(2)))

	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Prune).To(BeEmpty())
	Expect(inv.Objects).To(ContainElement(HaveField("ApiVersion", "autoscaling/v2")))
}

// TestOldFormatInventoryIsMigrated: an inventory written by the first format (apiVersion in the key) is read,
// its object is not pruned under the new version, and the next record stores the current format.
func TestOldFormatInventoryIsMigrated(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "app", "")
	sha1 := deployOK(t, ns, r, map[string]*string{"app/hpa.yaml": hpaYAML("autoscaling/v1", 3),
		"app/a.yaml": configMapYAML("a", "", "1")})
	hpa, err := getObj(ctx, "autoscaling/v1", "HorizontalPodAutoscaler", ns, "web")
	Expect(err).NotTo(HaveOccurred())

	// Replace the inventory with what the first format stored for the same set.
	cm := &corev1.ConfigMap{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: inventory.Name("web")}, cm)).To(Succeed())
	cm.Data = map[string]string{"commit": sha1,
		"objects": fmt.Sprintf(`[{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","namespace":%q,`+
			`"name":"web"},{"apiVersion":"v1","kind":"ConfigMap","namespace":%q,"name":"a"}]`, ns, ns),
		"prune": "[]"}
	Expect(env.Client.Update(ctx, cm)).To(Succeed())

	deployOK(t, ns, r, map[string]*string{"app/hpa.yaml": hpaYAML("autoscaling/v2", 4), "app/a.yaml": nil})
	after, err := getObj(ctx, "autoscaling/v2", "HorizontalPodAutoscaler", ns, "web")
	Expect(err).NotTo(HaveOccurred(), "the HPA recorded by the old format was pruned")
	Expect(after.GetUID()).To(Equal(hpa.GetUID()))
	_, err = getCM(ctx, ns, "a")
	Expect(err).To(HaveOccurred(), "the removed ConfigMap recorded by the old format is pruned")
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: inventory.Name("web")}, cm)).To(Succeed())
	Expect(cm.Data).To(HaveKeyWithValue("format", inventory.Format))
	Expect(cm.Data["objects"]).To(ContainSubstring(`"group":"autoscaling"`))
}

// holdBatch makes the provisioner of the first event in ns that reaches its second write batch block before that
// batch's lease check until release is closed: the event is held inside its apply, with the first batch written.
func holdBatch(ns string) (entered chan string, release chan struct{}) {
	entered, release = make(chan string, 1), make(chan struct{})
	var mu sync.Mutex
	batches := map[string]int{}
	held := false
	f := func(pc pipeline.Context, _ schema.GroupKind) {
		mu.Lock()
		if pc.Namespace != ns || held {
			mu.Unlock()
			return
		}
		batches[pc.LeaseID]++
		hold := batches[pc.LeaseID] == 2
		held = hold
		mu.Unlock()
		if hold {
			entered <- pc.LeaseID
			<-release
		}
	}
	batchHook.Store(&f)
	return entered, release
}

func secretYAML(name, value string) *string {
	return s(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\nstringData:\n  value: %q\n", name, value))
}

// TestOlderEventHeldInsideItsApplyIsSuperseded: an older event that already wrote its first batch when a newer
// event took the lease and deployed writes nothing more, records nothing and ends superseded (not failed).
func TestOlderEventHeldInsideItsApplyIsSuperseded(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	entered, release := holdBatch(ns)
	defer batchHook.Store(nil)

	sha1, changed1 := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "old"),
		"deploy/s.yaml": secretYAML("s", "old")})
	older := accepted(t, ns, r.pushPayload(sha1, changed1))
	Eventually(entered).Should(Receive())
	sha2, changed2 := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "new"),
		"deploy/s.yaml": secretYAML("s", "new")})
	newer := accepted(t, ns, r.pushPayload(sha2, changed2))
	Expect(waitEvent(t, newer).Status.Code).NotTo(Equal(codes.Error))
	close(release)

	root := waitEvent(t, older)
	Expect(root.Status.Code).NotTo(Equal(codes.Error), "a superseded event is not a failure: %s", root.Status.Description)
	superseded := attribute.Bool(stage.AttrSuperseded, true)
	Expect(named(traceSpans(older), "provisioner")[0].Attributes).To(ContainElement(superseded))
	Expect(named(traceSpans(older), "source_target")[0].Attributes).To(ContainElement(superseded))
	Expect(named(traceSpans(older), "pruner")).To(BeEmpty())

	Expect(mustCM(ctx, ns, "a").Data).To(HaveKeyWithValue("value", "new"))
	sec := &corev1.Secret{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "s"}, sec)).To(Succeed())
	Expect(string(sec.Data["value"])).To(Equal("new"), "the older event overwrote the newer one's Secret")
	Expect(sec.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha2))
	inv, _, err := inventory.Read(ctx, env.Client, ns, "web")
	Expect(err).NotTo(HaveOccurred())
	Expect(inv.Commit).To(Equal(sha2))
	Expect(mustCM(ctx, ns, "web").Annotations).To(HaveKeyWithValue(pipeline.AnnotationDeployed, sha2))
}

// TestDriftIsRepairedByTheNextEvent: an object edited behind the pipeline's back (kubectl edit) is applied again by
// the next event although its manifest did not change; the repair is a span event and is reported on the source
// target, while untouched objects are not written.
func TestDriftIsRepairedByTheNextEvent(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	deployOK(t, ns, r, map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1"),
		"deploy/b.yaml": configMapYAML("b", "", "1")})
	a := mustCM(ctx, ns, "a")
	a.Data["value"] = "edited"
	Expect(env.Client.Update(ctx, a)).To(Succeed())
	rvB := mustCM(ctx, ns, "b").ResourceVersion

	sha, changed := r.commit(map[string]*string{"deploy/README.md": s("docs only")})
	eventID := accepted(t, ns, r.pushPayload(sha, changed))
	Expect(waitEvent(t, eventID).Status.Code).NotTo(Equal(codes.Error))
	Expect(mustCM(ctx, ns, "a").Data).To(HaveKeyWithValue("value", "1"), "the drift survived the event")
	Expect(mustCM(ctx, ns, "b").ResourceVersion).To(Equal(rvB), "an undrifted object is not written")
	prov := named(traceSpans(eventID), "provisioner")[0]
	Expect(prov.Events).To(ContainElement(HaveField("Name", "drift.repaired")))
	Expect(prov.Attributes).To(ContainElement(attribute.Int("provisioner.repaired", 1)))
	Expect(prov.Attributes).To(ContainElement(attribute.Int("provisioner.applied", 0)))
	Expect(mustCM(ctx, ns, "web").Annotations).To(HaveKeyWithValue(pipeline.AnnotationDriftRepaired,
		ContainSubstring("1 objects, first ConfigMap "+ns+"/a")))
}

// TestPeriodicReconcileRepairsDriftWithoutAPush: a source target with a reconcile interval re-deploys its last
// deployed commit on its own, repairing an edited object.
func TestPeriodicReconcileRepairsDriftWithoutAPush(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	sha := deployOK(t, ns, r, map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1")})
	tcm := mustCM(ctx, ns, "web")
	Expect(tcm.Annotations).To(HaveKeyWithValue(pipeline.AnnotationDeployed, sha))
	tcm.Data[source.DataReconcileInterval] = "1s"
	Expect(env.Client.Update(ctx, tcm)).To(Succeed())
	a := mustCM(ctx, ns, "a")
	a.Data["value"] = "edited"
	Expect(env.Client.Update(ctx, a)).To(Succeed())
	Eventually(func(g Gomega) {
		cm, err := getCM(ctx, ns, "a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cm.Data).To(HaveKeyWithValue("value", "1"))
	}, 30*time.Second).Should(Succeed())
	Expect(mustCM(ctx, ns, "a").Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
}

// TestPollDeploysAPushWhoseWebhookWasLost: a push whose webhook never arrives is deployed by the periodic poll of
// the ref's head, and a target registered after the last push is deployed by its first poll.
func TestPollDeploysAPushWhoseWebhookWasLost(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "deploy", "")
	deployOK(t, ns, r, map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "1"),
		"other/o.yaml": configMapYAML("o", "", "1")})
	tcm := mustCM(ctx, ns, "web")
	tcm.Data[source.DataReconcileInterval] = "1s"
	Expect(env.Client.Update(ctx, tcm)).To(Succeed())
	sourceTarget(ctx, ns, "idle", r, "other", "")
	idle := mustCM(ctx, ns, "idle")
	idle.Data[source.DataReconcileInterval] = "1s"
	Expect(env.Client.Update(ctx, idle)).To(Succeed())

	// No webhook for this push: the delivery was lost.
	sha2, _ := r.commit(map[string]*string{"deploy/a.yaml": configMapYAML("a", "", "2"),
		"deploy/b.yaml": configMapYAML("b", "", "2")})
	Eventually(func(g Gomega) {
		a, err := getCM(ctx, ns, "a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Data).To(HaveKeyWithValue("value", "2"), "the poll did not deploy the head of the ref")
		b, err := getCM(ctx, ns, "b")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha2))
		web := mustCM(ctx, ns, "web")
		g.Expect(web.Annotations).To(HaveKeyWithValue(pipeline.AnnotationDeployed, sha2))
		g.Expect(web.Annotations).To(HaveKeyWithValue(source.AnnotationHeadSeen, sha2))
		g.Expect(web.Annotations).To(HaveKeyWithValue(pipeline.AnnotationResult, source.ResultSucceeded))
	}, 30*time.Second).Should(Succeed())
	Eventually(func(g Gomega) {
		o, err := getCM(ctx, ns, "o")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.Labels).To(HaveKeyWithValue(pipeline.LabelSourceTarget, ns+".idle"),
			"a target registered after the push was not deployed by its poll")
		g.Expect(mustCM(ctx, ns, "idle").Annotations).To(HaveKeyWithValue(pipeline.AnnotationDeployed, sha2))
	}, 30*time.Second).Should(Succeed())
}
