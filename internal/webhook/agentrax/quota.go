package agentrax

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// QuotaAdmission reserves an AgentDeployment's demand in its TenantQuota's status.reservations. Every write is an
// update carrying the resourceVersion that was read, so the API server accepts exactly one of any set of
// concurrent writers and the others re-read and decide again: any number of webhook replicas (or managers) admit
// as if one at a time. Reads go straight to the API server, never to a cache.
type QuotaAdmission struct {
	Reader      client.Reader
	Writer      client.Client
	GPUResource corev1.ResourceName
}

var agentDeployments = schema.GroupResource{Group: agentraxv1alpha1.GroupVersion.Group, Resource: "agentdeployments"}

// errRetry marks a lost compare-and-swap.
var errRetry = errors.New("reservation conflict")

// Reserve admits ad (a create when old is nil) against its quota and records the reservation, unless dryRun.
func (q *QuotaAdmission) Reserve(ctx context.Context, ad, old *agentraxv1alpha1.AgentDeployment, dryRun bool) error {
	newDemand := quota.DemandOf(ad, q.GPUResource)
	var oldDemand *quota.Demand
	if old != nil {
		d := quota.DemandOf(old, q.GPUResource)
		if newDemand.Replicas <= d.Replicas && newDemand.GPUs <= d.GPUs {
			return nil // nothing grows: nothing to check or reserve
		}
		oldDemand = &d
	}
	return q.casLoop(ctx, func(attempt int) error {
		tq := &agentraxv1alpha1.TenantQuota{}
		key := types.NamespacedName{Namespace: ad.Namespace, Name: ad.Spec.TenantRef}
		if err := q.Reader.Get(ctx, key, tq); err != nil {
			if apierrors.IsNotFound(err) {
				return apierrors.NewForbidden(agentDeployments, ad.Name, field.NotFound(
					field.NewPath("spec", "tenantRef"), fmt.Sprintf("TenantQuota %s", key)))
			}
			return err
		}
		decision := quota.Admit(quota.Request{
			Quota: fmt.Sprintf("%q", tq.Name), Spec: tq.Spec, Ledger: tq.Status.Reservations,
			Name: ad.Name, New: newDemand, Old: oldDemand, GPUResource: q.GPUResource,
		})
		if len(decision.Errors) > 0 {
			return apierrors.NewForbidden(agentDeployments, ad.Name, decision.Errors.ToAggregate())
		}
		if decision.Reserve == nil || dryRun {
			return nil
		}
		r := *decision.Reserve
		r.ReservedAt = metav1.NewTime(time.Now().Truncate(time.Second))
		tq.Status.Reservations = quota.Upsert(tq.Status.Reservations, r)
		return q.write(ctx, tq)
	})
}

// Release drops ad's reservation. It never fails the delete: the TenantQuota controller settles anything left.
func (q *QuotaAdmission) Release(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) {
	err := q.casLoop(ctx, func(int) error {
		tq := &agentraxv1alpha1.TenantQuota{}
		if err := q.Reader.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: ad.Spec.TenantRef}, tq); err != nil {
			return client.IgnoreNotFound(err)
		}
		if quota.Find(tq.Status.Reservations, ad.Name) < 0 {
			return nil
		}
		tq.Status.Reservations = quota.Remove(tq.Status.Reservations, ad.Name)
		return q.write(ctx, tq)
	})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "releasing the quota reservation; the TenantQuota controller will settle it",
			"agentDeployment", ad.Name, "tenantQuota", ad.Spec.TenantRef)
	}
}

// write updates the status with the resourceVersion that was read; a conflict means another writer won.
func (q *QuotaAdmission) write(ctx context.Context, tq *agentraxv1alpha1.TenantQuota) error {
	err := q.Writer.Status().Update(ctx, tq)
	if apierrors.IsConflict(err) {
		return errRetry
	}
	return err
}

// casLoop runs try until it stops returning errRetry, with a short jittered backoff, until ctx (the admission
// request's deadline) ends or 200 attempts were made.
func (q *QuotaAdmission) casLoop(ctx context.Context, try func(attempt int) error) error {
	for attempt := 0; ; attempt++ {
		err := try(attempt)
		if !errors.Is(err, errRetry) {
			return err
		}
		if attempt >= 200 {
			return apierrors.NewTooManyRequests("too much contention on the TenantQuota reservation ledger; retry", 1)
		}
		wait := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 5)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
