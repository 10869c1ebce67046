package quota

import (
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

func create(name string, replicas int32, perPod int64) Op {
	return Op{Name: name, New: Demand{Replicas: replicas, GPUs: int64(replicas) * perPod, GPUsPerPod: perPod}}
}

func TestDecideBatch(t *testing.T) {
	now := metav1.Unix(1000, 0)
	spec := agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 3, MaxGPUs: 8, MaxTotalReplicas: 10, MaxReplicasPerAgent: 5}
	dry := func(o Op) Op { o.DryRun = true; return o }
	for name, tc := range map[string]struct {
		ledger  []agentraxv1alpha1.Reservation
		ops     []Op
		refused []bool
		want    []agentraxv1alpha1.Reservation
		changed bool
	}{
		"empty batch writes nothing": {ledger: []agentraxv1alpha1.Reservation{res("a", 1, 0)},
			want: []agentraxv1alpha1.Reservation{res("a", 1, 0)}},
		"creates that fit are all reserved": {ops: []Op{create("b", 2, 1), create("a", 3, 1)}, refused: []bool{false, false},
			want: []agentraxv1alpha1.Reservation{resAt("a", 3, 3, now), resAt("b", 2, 2, now)}, changed: true},
		"a later op sees the earlier ones": {ledger: []agentraxv1alpha1.Reservation{res("x", 4, 4)},
			ops: []Op{create("a", 3, 1), create("b", 2, 1)}, refused: []bool{false, true},
			want: []agentraxv1alpha1.Reservation{resAt("a", 3, 3, now), res("x", 4, 4)}, changed: true},
		"maxAgents across the batch": {ops: []Op{create("a", 1, 0), create("b", 1, 0), create("c", 1, 0), create("d", 1, 0)},
			refused: []bool{false, false, false, true},
			want:    []agentraxv1alpha1.Reservation{resAt("a", 1, 0, now), resAt("b", 1, 0, now), resAt("c", 1, 0, now)}, changed: true},
		"a release frees room for the next op": {ledger: []agentraxv1alpha1.Reservation{res("x", 5, 5), res("y", 5, 0)},
			ops: []Op{create("a", 2, 0), {Name: "y", Release: true}, create("b", 2, 0)}, refused: []bool{true, false, false},
			want: []agentraxv1alpha1.Reservation{resAt("b", 2, 0, now), res("x", 5, 5)}, changed: true},
		"dry runs are decided but never recorded": {ledger: []agentraxv1alpha1.Reservation{res("x", 8, 0)},
			ops: []Op{dry(create("a", 2, 0)), dry(create("b", 3, 0))}, refused: []bool{false, true},
			want: []agentraxv1alpha1.Reservation{res("x", 8, 0)}},
		"releasing an unknown name changes nothing": {ops: []Op{{Name: "ghost", Release: true}}, refused: []bool{false}},
		// The write (a fresh reservedAt, amounts kept) is the barrier against the TenantQuota controller lowering
		// the covering reservation from a spec it read before the update.
		"an update whose growth is covered still writes the reservation": {ledger: []agentraxv1alpha1.Reservation{res("a", 4, 4)},
			ops:     []Op{{Name: "a", New: Demand{Replicas: 3, GPUs: 3, GPUsPerPod: 1}, Old: &Demand{Replicas: 2, GPUs: 2, GPUsPerPod: 1}}},
			refused: []bool{false}, want: []agentraxv1alpha1.Reservation{resAt("a", 4, 4, now)}, changed: true},
		"an update that grows nothing writes nothing": {ledger: []agentraxv1alpha1.Reservation{res("a", 4, 4)},
			ops:     []Op{{Name: "a", New: Demand{Replicas: 2, GPUs: 2, GPUsPerPod: 1}, Old: &Demand{Replicas: 3, GPUs: 3, GPUsPerPod: 1}}},
			refused: []bool{false}, want: []agentraxv1alpha1.Reservation{res("a", 4, 4)}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			input := append([]agentraxv1alpha1.Reservation(nil), tc.ledger...)
			b := DecideBatch(`"q"`, spec, input, tc.ops, DefaultGPUResourceName, now)
			g.Expect(b.Errors).To(HaveLen(len(tc.ops)))
			for i := range tc.ops {
				refused := len(b.Errors[i]) > 0
				g.Expect(refused).To(Equal(tc.refused[i]), "op %d (%s): %v", i, tc.ops[i].Name, b.Errors[i])
			}
			g.Expect(b.Ledger).To(Equal(tc.want))
			g.Expect(b.Changed).To(Equal(tc.changed))
			g.Expect(input).To(Equal(tc.ledger), "the input ledger is never modified")
		})
	}
}

// TestDecideBatchEqualsOneAtATime: a batch decides exactly what the same ops admitted one by one would, so one
// resourceVersion-checked write of the batch's ledger is as safe as one write per admission.
func TestDecideBatchEqualsOneAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	now := metav1.Unix(1000, 0)
	for round := range 500 {
		spec := agentraxv1alpha1.TenantQuotaSpec{MaxAgents: int32(1 + rng.IntN(8)), MaxGPUs: int64(rng.IntN(20)),
			MaxTotalReplicas: int32(1 + rng.IntN(25)), MaxReplicasPerAgent: int32(1 + rng.IntN(5))}
		var ledger []agentraxv1alpha1.Reservation
		for i := range rng.IntN(4) {
			ledger = Upsert(ledger, res(fmt.Sprintf("pre%d", i), int32(1+rng.IntN(4)), int64(rng.IntN(4))))
		}
		var ops []Op
		for range 1 + rng.IntN(12) {
			name := fmt.Sprintf("a%d", rng.IntN(6))
			switch rng.IntN(4) {
			case 0:
				ops = append(ops, Op{Name: name, Release: true})
			case 1:
				o := create(name, int32(1+rng.IntN(6)), int64(rng.IntN(3)))
				old := Demand{Replicas: int32(1 + rng.IntN(6)), GPUsPerPod: o.New.GPUsPerPod}
				old.GPUs = int64(old.Replicas) * old.GPUsPerPod
				o.Old, o.DryRun = &old, rng.IntN(4) == 0
				ops = append(ops, o)
			default:
				o := create(name, int32(1+rng.IntN(6)), int64(rng.IntN(3)))
				o.DryRun = rng.IntN(5) == 0
				ops = append(ops, o)
			}
		}
		batch := DecideBatch(`"q"`, spec, ledger, ops, DefaultGPUResourceName, now)
		one := ledger
		for i, op := range ops {
			single := DecideBatch(`"q"`, spec, one, []Op{op}, DefaultGPUResourceName, now)
			if fmt.Sprint(single.Errors[0]) != fmt.Sprint(batch.Errors[i]) {
				t.Fatalf("round %d op %d: batch decided %v, one at a time %v", round, i, batch.Errors[i], single.Errors[0])
			}
			one = single.Ledger
		}
		NewWithT(t).Expect(batch.Ledger).To(Equal(one), "round %d", round)
	}
}

func resAt(name string, replicas int32, gpus int64, at metav1.Time) agentraxv1alpha1.Reservation {
	r := res(name, replicas, gpus)
	r.ReservedAt = at
	return r
}
