package quota

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// Op is one admission waiting to be decided against a quota's ledger: a reservation (create or update) or a
// release (delete).
type Op struct {
	// Name of the AgentDeployment.
	Name string
	// Release drops Name's reservation; New, Old and DryRun are ignored.
	Release bool
	// New is what the admitted object claims.
	New Demand
	// Old is what it claimed before an update; nil for a create.
	Old *Demand
	// DryRun decides without recording anything.
	DryRun bool
}

// Batch is the outcome of deciding several ops against one ledger.
type Batch struct {
	// Ledger is the ledger after every admitted, non-dry-run op; it never shares memory with the input.
	Ledger []agentraxv1alpha1.Reservation
	// Errors has one entry per op: the ceilings it would break, nil when admitted (releases always are).
	Errors []field.ErrorList
	// Changed tells whether Ledger differs from the input, i.e. whether it must be written.
	Changed bool
}

// DecideBatch decides ops in order, each against the ledger left by the ones before it, exactly as if they
// had been admitted one at a time; so writing the resulting ledger once (with a resourceVersion precondition)
// commits them all. quotaName and gpu are for messages; now stamps new or raised reservations.
func DecideBatch(quotaName string, spec agentraxv1alpha1.TenantQuotaSpec, ledger []agentraxv1alpha1.Reservation,
	ops []Op, gpu corev1.ResourceName, now metav1.Time) Batch {
	out := Batch{Ledger: append([]agentraxv1alpha1.Reservation(nil), ledger...), Errors: make([]field.ErrorList, len(ops))}
	for i, op := range ops {
		if op.Release {
			if Find(out.Ledger, op.Name) >= 0 {
				out.Ledger = Remove(out.Ledger, op.Name)
				out.Changed = true
			}
			continue
		}
		d := Admit(Request{Quota: quotaName, Spec: spec, Ledger: out.Ledger, Name: op.Name, New: op.New, Old: op.Old, GPUResource: gpu})
		if len(d.Errors) > 0 {
			out.Errors[i] = d.Errors
			continue
		}
		if d.Reserve == nil || op.DryRun {
			continue
		}
		r := *d.Reserve
		r.ReservedAt = now
		out.Ledger = Upsert(out.Ledger, r)
		out.Changed = true
	}
	if len(out.Ledger) == 0 {
		out.Ledger = nil
	}
	return out
}
