package agentrax

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// QuotaAdmission reserves an AgentDeployment's demand in its TenantQuota's status.ledger.
//
// Invariant: the reservations in a TenantQuota's stored ledger always cover (are at least) what every
// AgentDeployment admitted against it claims, and the ledger never holds more than the quota allows for what it
// admitted. It holds because the API server is the authority: every decision is made on a ledger the API server
// confirmed current, either by accepting the write of its outcome with the resourceVersion it was decided on
// (a status update carries the resourceVersion; a concurrent writer makes it fail with a conflict, and the
// whole group is decided again on a fresh read), or by having just been read (decisions that write nothing). So
// any number of webhook replicas (or managers) admit as if one at a time. The ledger is one object per tenant
// on purpose: Kubernetes has no multi-object transaction, so a ceiling over a sum needs one compare-and-swap
// point holding every term of the sum; per-agent records would need a second write per admission and a repair
// protocol for a crash between the two writes. What keeps the single write cheap is its encoding: one compact
// string, about 25 bytes per agent (quota.FormatLedger), instead of a list of objects.
//
// Within one process the admissions of a tenant are queued and committed in groups (ledger.go): one write
// decides every request that arrived while the previous write was in flight, and the write's answer is kept as
// the base of the next group, so the common path is one status update per group with no read at all. Reads go
// straight to the API server, never to a cache.
type QuotaAdmission struct {
	Reader      client.Reader
	Writer      client.Client
	GPUResource corev1.ResourceName

	once    sync.Once
	ledgers *ledgers
}

var agentDeployments = schema.GroupResource{Group: agentraxv1alpha1.GroupVersion.Group, Resource: "agentdeployments"}

func (q *QuotaAdmission) queue() *ledgers {
	q.once.Do(func() {
		q.ledgers = newLedgers(apiStore{reader: q.Reader, writer: q.Writer}, q.GPUResource)
	})
	return q.ledgers
}

// ObserveInformer feeds the TenantQuotas the informer sees to the admission queues, so that a queue's next write
// starts from the newest known ledger (after the TenantQuota controller or another replica wrote) instead of
// first losing a compare-and-swap. Optional: without it every foreign write costs one lost write and one read.
func (q *QuotaAdmission) ObserveInformer(c cache.Informers) error {
	inf, err := c.GetInformer(context.Background(), &agentraxv1alpha1.TenantQuota{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watching TenantQuotas for quota admission: %w", err)
	}
	seen := func(o any) {
		if tq, ok := o.(*agentraxv1alpha1.TenantQuota); ok {
			q.queue().observe(tq)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { seen(o) },
		UpdateFunc: func(_, o any) { seen(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if tq, ok := o.(*agentraxv1alpha1.TenantQuota); ok {
				q.queue().forget(types.NamespacedName{Namespace: tq.Namespace, Name: tq.Name})
			}
		},
	})
	return err
}

// Reserve admits ad (a create when old is nil) against its quota and records the reservation, unless dryRun.
func (q *QuotaAdmission) Reserve(ctx context.Context, ad, old *agentraxv1alpha1.AgentDeployment, dryRun bool) error {
	op := quota.Op{Name: ad.Name, New: quota.DemandOf(ad, q.GPUResource), DryRun: dryRun}
	if old != nil {
		d := quota.DemandOf(old, q.GPUResource)
		if op.New.Replicas <= d.Replicas && op.New.GPUs <= d.GPUs {
			return nil // nothing grows: nothing to check or reserve, no API call
		}
		op.Old = &d
	}
	return q.queue().submit(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: ad.Spec.TenantRef}, op)
}

// apiStore reads TenantQuotas from the API server and writes their status with a resourceVersion precondition.
type apiStore struct {
	reader client.Reader
	writer client.Client
}

func (s apiStore) get(ctx context.Context, key types.NamespacedName) (*agentraxv1alpha1.TenantQuota, error) {
	tq := &agentraxv1alpha1.TenantQuota{}
	return tq, s.reader.Get(ctx, key, tq)
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// swap is a JSON patch of the status whose "test" operations are the compare-and-swap: the API server applies
// a patch to the object it is about to replace (re-applying it if that object changed under it), so the tests
// hold for exactly the stored version. Unlike a resourceVersion precondition, it does not fail because the
// TenantQuota controller wrote usage counters or conditions, or someone labelled the object, since admission
// last saw it. An empty ledger may be stored absent or as "", which no test operation tells apart: then the
// write is a status update carrying the resourceVersion, as strict as before.
func (s apiStore) swap(ctx context.Context, base *agentraxv1alpha1.TenantQuota, ledger string) (*agentraxv1alpha1.TenantQuota, error) {
	next := base.DeepCopy()
	next.Status.Ledger = ledger
	if base.Status.Ledger == "" {
		return next, s.writer.Status().Update(ctx, next)
	}
	ops := []jsonPatchOp{
		{Op: "test", Path: "/metadata/uid", Value: base.UID},
		{Op: "test", Path: "/metadata/generation", Value: base.Generation},
		{Op: "test", Path: "/status/ledger", Value: base.Status.Ledger},
		{Op: "add", Path: "/status/ledger", Value: ledger},
	}
	if ledger == "" {
		ops[3] = jsonPatchOp{Op: "remove", Path: "/status/ledger"}
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	err = s.writer.Status().Patch(ctx, next, client.RawPatch(types.JSONPatchType, body))
	if failedTest(err) {
		return nil, apierrors.NewConflict(tenantQuotas, base.Name, errors.New("the ledger, spec or object changed since admission read it"))
	}
	return next, err
}

var tenantQuotas = schema.GroupResource{Group: agentraxv1alpha1.GroupVersion.Group, Resource: "tenantquotas"}

// failedTest tells a JSON patch the API server could not apply to the stored object — here, a "test" operation
// that did not hold. The API server answers 422 Invalid with a generic message and empty details (the patch
// library's reason is not passed on); a patched object that breaks the schema is 422 Invalid too, but names the
// object and carries the field causes.
func failedTest(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || (d.Name == "" && len(d.Causes) == 0)
}

// refusal is the admission error for an op the quota does not fit.
func refusal(name string, errs field.ErrorList) error {
	return apierrors.NewForbidden(agentDeployments, name, errs.ToAggregate())
}

// quotaNotFound refuses an admission whose TenantQuota does not exist.
func quotaNotFound(name string, key types.NamespacedName) error {
	return apierrors.NewForbidden(agentDeployments, name, field.NotFound(
		field.NewPath("spec", "tenantRef"), fmt.Sprintf("TenantQuota %s", key)))
}
