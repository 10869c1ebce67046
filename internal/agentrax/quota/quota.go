// Package quota is the TenantQuota arithmetic of the agentrax group: what an AgentDeployment claims, whether an
// admission fits a quota's ledger, how much of a quota agents use, and how far an agent's autoscaler may go. It
// makes no API calls.
package quota

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// DefaultGPUResourceName is the extended resource counted as GPUs unless --gpu-resource-name says otherwise.
const DefaultGPUResourceName corev1.ResourceName = "nvidia.com/gpu"

// CanaryReplicas is how many canary pods ad is charged for: the canary is sized ceil(weight% × stable replicas)
// (at least one pod), so the charge is ceil(highest setWeight% × StableReplicas(ad)). It follows the stable's
// actual replicas rather than replicas.max: a stable the autoscaler holds at 2 of 10 gets a canary of at most 2.
// When the stable grows while the canary runs, the TenantQuota controller raises the charge only into room the
// quota still has (Settle), and the controller never scales the canary beyond what the agent's reservation holds.
func CanaryReplicas(ad *agentraxv1alpha1.AgentDeployment) int32 {
	var top int64
	if ad.Spec.Rollout != nil {
		for _, s := range ad.Spec.Rollout.Steps {
			if s.SetWeight != nil {
				top = max(top, min(max(int64(*s.SetWeight), 0), 100))
			}
		}
	}
	n := (top*int64(StableReplicas(ad)) + 99) / 100
	return int32(max(n, 1))
}

// StableReplicas is the stable replica count a canary of ad is sized against: the larger of the count when the
// canary started (status.baselineReplicas) and the stable Deployment's current one (status.currentReplicas),
// within [replicas.min, replicas.max] (a rolling update's surge pods do not raise it; a stable not observed yet
// runs at least replicas.min).
func StableReplicas(ad *agentraxv1alpha1.AgentDeployment) int32 {
	n := max(ad.Status.BaselineReplicas, ad.Status.CurrentReplicas)
	return max(min(n, ad.Spec.Replicas.Max), ad.Spec.Replicas.Min, 0)
}

// Demand is what one AgentDeployment claims from its TenantQuota.
type Demand struct {
	// Replicas is replicas.max, plus CanaryPods while a canary runs.
	Replicas int32
	// CanaryPods is the canary's share of Replicas (CanaryReplicas), 0 when no canary runs.
	CanaryPods int32
	// GPUs is GPUsPerPod × Replicas.
	GPUs int64
	// GPUsPerPod is the container's GPU limit (rounded up); kept to explain the arithmetic in messages.
	GPUsPerPod int64
	// Canary tells whether the canary's pods are included.
	Canary bool
}

// GPUsPerPod returns the GPU limit (or, without a limit, the request) of the agent container, rounded up.
func GPUsPerPod(r corev1.ResourceRequirements, gpu corev1.ResourceName) int64 {
	if q, ok := r.Limits[gpu]; ok {
		return q.Value()
	}
	if q, ok := r.Requests[gpu]; ok {
		return q.Value()
	}
	return 0
}

// CanaryActive tells whether ad is (or, being admitted with a new image or a retry, is about to be) running a
// canary: the strategy is Canary with a traffic block and the spec's image differs from the stable one and from the
// image whose canary was last rolled back (that one is not retried unless RetryRequested), or the status says a
// canary runs.
func CanaryActive(ad *agentraxv1alpha1.AgentDeployment) bool {
	if ad.Status.CanaryVersion != "" || ad.Status.Phase == agentraxv1alpha1.PhaseRolloutInProgress {
		return true
	}
	// Without spec.rollout.traffic the controller never starts the canary (nothing could send it traffic), so
	// nothing is charged for it: the charge would otherwise be held for ever.
	canary := ad.Spec.Rollout != nil && ad.Spec.Rollout.Strategy == agentraxv1alpha1.StrategyCanary &&
		ad.Spec.Rollout.Traffic != nil
	return canary && ad.Status.StableVersion != "" && ad.Spec.Image != ad.Status.StableVersion &&
		(ad.Spec.Image != ad.Status.AbortedVersion || RetryRequested(ad))
}

// RetryRequested tells whether the agentrax.io/retry-rollout annotation holds a value the rollout has not acted on
// yet: the rolled-back image is about to be tried again, so admission charges its canary before the controller
// starts it (and refuses the annotation when the quota has no room for it).
func RetryRequested(ad *agentraxv1alpha1.AgentDeployment) bool {
	v := ad.Annotations[agentraxv1alpha1.AnnotationRetryRollout]
	return v != "" && v != ad.Status.RetriedRollout
}

// DemandOf returns what ad claims, counting gpu as the GPU resource.
func DemandOf(ad *agentraxv1alpha1.AgentDeployment, gpu corev1.ResourceName) Demand {
	d := Demand{Replicas: ad.Spec.Replicas.Max, GPUsPerPod: GPUsPerPod(ad.Spec.Resources, gpu)}
	if CanaryActive(ad) {
		d.Canary = true
		d.CanaryPods = CanaryReplicas(ad)
		d.Replicas += d.CanaryPods
	}
	d.GPUs = d.GPUsPerPod * int64(d.Replicas)
	return d
}

// Settle returns what the TenantQuota controller records for an agent demanding d whose reservation is held:
// d, except that a canary charge growing outside admission (the stable scaled up while the canary runs) grows
// only into the room the quota has beside others (the other agents' reservations) and never below what held
// already reserves for the canary. The rest of d (replicas.max and its GPUs, which only admission raises) is
// taken as it is.
func Settle(d Demand, held agentraxv1alpha1.Reservation, spec agentraxv1alpha1.TenantQuotaSpec, others Usage) Demand {
	if !d.Canary {
		return d
	}
	base := d.Replicas - d.CanaryPods
	room := int64(spec.MaxTotalReplicas) - int64(others.Replicas) - int64(base)
	if d.GPUsPerPod > 0 {
		room = min(room, (spec.MaxGPUs-others.GPUs)/d.GPUsPerPod-int64(base))
	}
	canaryHeld := int64(max(held.Replicas-base, 0))
	if d.GPUsPerPod > 0 {
		canaryHeld = min(canaryHeld, max(held.GPUs/d.GPUsPerPod-int64(base), 0))
	}
	d.CanaryPods = int32(min(int64(d.CanaryPods), max(room, canaryHeld)))
	d.Replicas = base + d.CanaryPods
	d.GPUs = d.GPUsPerPod * int64(d.Replicas)
	return d
}

// Usage sums what a set of agents claims.
type Usage struct {
	Agents   int32
	Replicas int32
	GPUs     int64
}

// Add returns u plus one agent claiming d.
func (u Usage) Add(d Demand) Usage {
	return Usage{Agents: u.Agents + 1, Replicas: u.Replicas + d.Replicas, GPUs: u.GPUs + d.GPUs}
}

// LedgerUsage sums the reservations of a ledger, leaving out the entry named except ("" leaves none out).
func LedgerUsage(ledger []agentraxv1alpha1.Reservation, except string) Usage {
	var u Usage
	for _, r := range ledger {
		if r.Name == except {
			continue
		}
		u.Agents++
		u.Replicas += r.Replicas
		u.GPUs += r.GPUs
	}
	return u
}

// Find returns the index of name's reservation in ledger, or -1.
func Find(ledger []agentraxv1alpha1.Reservation, name string) int {
	for i := range ledger {
		if ledger[i].Name == name {
			return i
		}
	}
	return -1
}

// Upsert sets name's reservation and keeps the ledger sorted by name.
func Upsert(ledger []agentraxv1alpha1.Reservation, r agentraxv1alpha1.Reservation) []agentraxv1alpha1.Reservation {
	if i := Find(ledger, r.Name); i >= 0 {
		ledger[i] = r
		return ledger
	}
	ledger = append(ledger, r)
	sort.Slice(ledger, func(i, j int) bool { return ledger[i].Name < ledger[j].Name })
	return ledger
}

// Remove drops name's reservation.
func Remove(ledger []agentraxv1alpha1.Reservation, name string) []agentraxv1alpha1.Reservation {
	if i := Find(ledger, name); i >= 0 {
		return append(ledger[:i], ledger[i+1:]...)
	}
	return ledger
}

// Request is one admission to decide.
type Request struct {
	// Quota is the TenantQuota's namespace/name, for messages.
	Quota string
	// Spec is the quota's ceilings.
	Spec agentraxv1alpha1.TenantQuotaSpec
	// Ledger is the quota's current reservations.
	Ledger []agentraxv1alpha1.Reservation
	// Name of the AgentDeployment being admitted.
	Name string
	// New is what the admitted object claims.
	New Demand
	// Old is what the object claimed before an update; nil for a create.
	Old *Demand
	// GPUResource names the GPU resource, for messages.
	GPUResource corev1.ResourceName
}

// Decision is the outcome of Admit.
type Decision struct {
	// Errors names every ceiling the request would break; empty means admitted.
	Errors field.ErrorList
	// Reserve is the reservation to record when admitted; nil when the ledger need not change (an update that
	// grows nothing). A growth an existing reservation covers is recorded again, amounts kept, as a barrier.
	Reserve *agentraxv1alpha1.Reservation
}

// Admit decides whether a create, or an update's growth, fits the quota. A create must fit every ceiling. An
// update is checked only in the dimensions it grows, so shrinking or unrelated edits always pass, even over a
// lowered quota. The reservation recorded is the larger of the existing entry and the new demand per dimension:
// a failed or in-flight request can over-reserve for a while, never under-reserve.
func Admit(req Request) Decision {
	spec := field.NewPath("spec")
	maxPath := spec.Child("replicas", "max")
	gpuPath := spec.Child("resources", "limits").Key(string(req.GPUResource))
	others := LedgerUsage(req.Ledger, req.Name)
	entry := agentraxv1alpha1.Reservation{Name: req.Name}
	existing := Find(req.Ledger, req.Name)
	if existing >= 0 {
		entry = req.Ledger[existing]
	}
	reserve := entry
	reserve.Replicas = max(entry.Replicas, req.New.Replicas)
	reserve.GPUs = max(entry.GPUs, req.New.GPUs)

	create := req.Old == nil
	growsReplicas := create || req.New.Replicas > req.Old.Replicas
	growsGPUs := create || req.New.GPUs > req.Old.GPUs
	var errs field.ErrorList
	if create && others.Agents+1 > req.Spec.MaxAgents {
		errs = append(errs, field.Forbidden(spec.Child("tenantRef"), fmt.Sprintf(
			"exceeds TenantQuota %s maxAgents: %d agents admitted + 1 = %d > %d",
			req.Quota, others.Agents, others.Agents+1, req.Spec.MaxAgents)))
	}
	if growsReplicas && req.New.Replicas-canary(req.New) > req.Spec.MaxReplicasPerAgent {
		errs = append(errs, field.Forbidden(maxPath, fmt.Sprintf(
			"exceeds TenantQuota %s maxReplicasPerAgent: replicas.max %d > %d",
			req.Quota, req.New.Replicas-canary(req.New), req.Spec.MaxReplicasPerAgent)))
	}
	if growsReplicas && others.Replicas+reserve.Replicas > req.Spec.MaxTotalReplicas {
		errs = append(errs, field.Forbidden(maxPath, fmt.Sprintf(
			"exceeds TenantQuota %s maxTotalReplicas: %d reserved by other agents + %d%s = %d > %d",
			req.Quota, others.Replicas, reserve.Replicas, canaryNote(req.New),
			others.Replicas+reserve.Replicas, req.Spec.MaxTotalReplicas)))
	}
	if growsGPUs && others.GPUs+reserve.GPUs > req.Spec.MaxGPUs {
		errs = append(errs, field.Forbidden(gpuPath, fmt.Sprintf(
			"exceeds TenantQuota %s maxGPUs: %d reserved by other agents + %d (%d %s × %d replicas%s) = %d > %d",
			req.Quota, others.GPUs, reserve.GPUs, req.New.GPUsPerPod, req.GPUResource, req.New.Replicas,
			canaryNote(req.New), others.GPUs+reserve.GPUs, req.Spec.MaxGPUs)))
	}
	if len(errs) > 0 {
		return Decision{Errors: errs}
	}
	if existing >= 0 && reserve.Replicas == entry.Replicas && reserve.GPUs == entry.GPUs && !growsReplicas && !growsGPUs {
		return Decision{}
	}
	// A growth the reservation already covers is still written (with a fresh reservedAt): the write is the
	// barrier against the TenantQuota controller lowering that reservation from a spec read before this update
	// (its write then conflicts and it settles again, leaving the fresh reservation alone for its grace period).
	return Decision{Reserve: &reserve}
}

func canary(d Demand) int32 {
	if d.Canary {
		return d.CanaryPods
	}
	return 0
}

func canaryNote(d Demand) string {
	if d.Canary {
		return fmt.Sprintf(", including %d canary", d.CanaryPods)
	}
	return ""
}

// Exceeded lists, in words, every ceiling the usage breaks; empty when it fits. perAgentMax is the largest
// replicas.max among the agents.
func Exceeded(spec agentraxv1alpha1.TenantQuotaSpec, u Usage, perAgentMax int32) []string {
	var out []string
	if u.Agents > spec.MaxAgents {
		out = append(out, fmt.Sprintf("agents %d > maxAgents %d", u.Agents, spec.MaxAgents))
	}
	if u.GPUs > spec.MaxGPUs {
		out = append(out, fmt.Sprintf("GPUs %d > maxGPUs %d", u.GPUs, spec.MaxGPUs))
	}
	if u.Replicas > spec.MaxTotalReplicas {
		out = append(out, fmt.Sprintf("replicas %d > maxTotalReplicas %d", u.Replicas, spec.MaxTotalReplicas))
	}
	if perAgentMax > spec.MaxReplicasPerAgent {
		out = append(out, fmt.Sprintf("an agent's replicas.max %d > maxReplicasPerAgent %d", perAgentMax, spec.MaxReplicasPerAgent))
	}
	return out
}

// UsageRatio is usedTotalReplicas / maxTotalReplicas, 0 when the ceiling is not positive.
func UsageRatio(spec agentraxv1alpha1.TenantQuotaSpec, u Usage) float64 {
	if spec.MaxTotalReplicas <= 0 {
		return 0
	}
	return float64(u.Replicas) / float64(spec.MaxTotalReplicas)
}

// Cap is the HPA's maxReplicas for one agent.
type Cap struct {
	// MaxReplicas for the HPA, never below min.
	MaxReplicas int32
	// Reduced is true when the quota lowered it below replicas.max.
	Reduced bool
	// Clamped is true when the headroom was below replicas.min and MaxReplicas was raised to min.
	Clamped bool
	// Headroom is maxTotalReplicas minus the replicas the other agents reserve.
	Headroom int32
}

// HPAMaxReplicas computes min(replicas.max, maxReplicasPerAgent, maxTotalReplicas − othersReplicas), clamped to
// replicas.min.
func HPAMaxReplicas(minReplicas, maxReplicas int32, spec agentraxv1alpha1.TenantQuotaSpec, othersReplicas int32) Cap {
	headroom := spec.MaxTotalReplicas - othersReplicas
	c := Cap{MaxReplicas: min(maxReplicas, spec.MaxReplicasPerAgent, headroom), Headroom: headroom}
	c.Reduced = c.MaxReplicas < maxReplicas
	if c.MaxReplicas < minReplicas {
		c.MaxReplicas, c.Clamped = minReplicas, true
	}
	return c
}

// Message joins Exceeded's phrases.
func Message(parts []string) string { return strings.Join(parts, "; ") }
