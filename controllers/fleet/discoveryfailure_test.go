package fleet_test

import (
	"context"
	"testing"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/fleet"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// repoll makes a discovery poll now: a spec change is due at once.
func repoll(g Gomega, key client.ObjectKey, interval time.Duration) {
	g.Eventually(func() error {
		d := &fleetv1alpha1.PipelineDiscovery{}
		if err := env.Client.Get(context.Background(), key, d); err != nil {
			return err
		}
		d.Spec.PollInterval = &metav1.Duration{Duration: interval}
		return env.Client.Update(context.Background(), d)
	}).Should(Succeed())
}

func TestPipelineDiscoveryRefreshFailureIsNotReadyAndTheRestGoesOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	good := putOTel(t, ns+"-good", nil)
	edited := putOTel(t, ns+"-edited", nil)
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ro"},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	dKey := client.ObjectKeyFromObject(d)
	goodKey := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(good.GetName())}
	editedKey := client.ObjectKey{Namespace: ns, Name: discovery.PipelineCRName(edited.GetName())}
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, dKey)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(got.Status.PipelinesManaged).To(BeEquivalentTo(2))
		// The read-only CR mirrors its Fleet pipeline into status.
		p := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, goodKey, p)).To(Succeed())
		g.Expect(p.Status.ID).To(Equal(good.GetId()))
		g.Expect(p.Status.ContentsHash).To(Equal(pipelines.ContentsHash(otelContents)))
		g.Expect(p.Status.Enabled).To(HaveValue(BeTrue()))
		g.Expect(p.Status.UpdatedAt).NotTo(BeNil())
	}).Should(Succeed())

	// In Fleet, one pipeline gets a matcher the webhook refuses, the other new contents and a disabled flag.
	srv.PutPipeline(&pipelinev1.Pipeline{Name: edited.GetName(), Contents: otelContents, Matchers: []string{"env==prod"},
		Enabled: proto.Bool(true), ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL})
	newContents := otelContents + "# v2\n"
	srv.PutPipeline(&pipelinev1.Pipeline{Name: good.GetName(), Contents: newContents, Enabled: proto.Bool(false),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL})
	failedBefore := metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "PipelineDiscovery", "reason": fleetv1alpha1.ReasonCRWriteFailed})
	repoll(g, dKey, 2*time.Minute)
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, dKey)
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "a failed refresh never leaves Ready=True")
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonCRWriteFailed))
		g.Expect(ready.Message).To(ContainSubstring(editedKey.String()))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		// The other CR was still refreshed, spec and status.
		p := &fleetv1alpha1.Pipeline{}
		g.Expect(env.Client.Get(ctx, goodKey, p)).To(Succeed())
		g.Expect(p.Spec.Contents).To(Equal(newContents))
		g.Expect(p.Status.ContentsHash).To(Equal(pipelines.ContentsHash(newContents)))
		g.Expect(p.Status.Enabled).To(HaveValue(BeFalse()))
	}).Should(Succeed())
	g.Expect(metricValue(g, "fleet_resource_synced_total", map[string]string{"kind": "PipelineDiscovery", "reason": fleetv1alpha1.ReasonCRWriteFailed}) -
		failedBefore).To(BeNumerically(">=", 1))

	// Fixed in Fleet: the next poll is Ready again.
	srv.PutPipeline(&pipelinev1.Pipeline{Name: edited.GetName(), Contents: otelContents, Matchers: []string{`env="prod"`},
		Enabled: proto.Bool(true), ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL})
	repoll(g, dKey, 3*time.Minute)
	g.Eventually(func(g Gomega) {
		got := pipelineDiscovery(g, dKey)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
	}).Should(Succeed())
}

// laggingCache answers reads of Pipelines as a cache that has not seen them yet; everything else, and every
// write, goes to the API server.
type laggingCache struct{ client.Client }

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*fleetv1alpha1.Pipeline); ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: fleetv1alpha1.GroupVersion.Group, Resource: "pipelines"}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*fleetv1alpha1.PipelineList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

func TestPipelineDiscoveryReadsTheAPIServerWhenTheCacheLags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dKey := readOnlyDiscoveryOfOne(t, g, newNamespace(t), "lag")

	// A reconciler whose cache has not seen the CR the first poll created: its create finds the CR there and
	// must decide from the API server's copy.
	r := &fleet.PipelineDiscoveryReconciler{
		Client:    laggingCache{env.Client},
		APIReader: env.Client,
		Poller:    fleet.Poller{Recorder: events.NewFakeRecorder(100)},
		Fleet: fleetclient.NewProvider(env.Client, fleetclient.ProviderOptions{
			Secret: types.NamespacedName{Namespace: "fleet-system", Name: "fleet-credentials"}}),
	}
	repoll(g, dKey, 2*time.Minute)
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: dKey})
	g.Expect(err).NotTo(HaveOccurred())
	got := pipelineDiscovery(g, dKey)
	g.Expect(got.Status.Conflicts).To(BeEmpty(), "its own CR is no conflict")
	g.Expect(got.Status.PipelinesManaged).To(BeEquivalentTo(1))
}

// readOnlyDiscoveryOfOne creates a read-only PipelineDiscovery named name in ns selecting one OpenTelemetry pipeline
// put in Fleet for it, and waits until it manages that pipeline's CR.
func readOnlyDiscoveryOfOne(t *testing.T, g Gomega, ns, name string) client.ObjectKey {
	t.Helper()
	ctx := context.Background()
	putOTel(t, ns+"-"+name, nil)
	d := &fleetv1alpha1.PipelineDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1alpha1.PipelineDiscoverySpec{Selector: otelSelector(), ImportMode: fleetv1alpha1.DiscoveryReadOnly}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	key := client.ObjectKeyFromObject(d)
	g.Eventually(func(g Gomega) {
		g.Expect(pipelineDiscovery(g, key).Status.PipelinesManaged).To(BeEquivalentTo(1))
	}).Should(Succeed())
	return key
}
