package quota

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

func agent(maxReplicas int32, gpus string) *agentraxv1alpha1.AgentDeployment {
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{
			Image: "img:v1", Replicas: agentraxv1alpha1.ReplicasSpec{Min: 1, Max: maxReplicas},
		},
	}
	if gpus != "" {
		ad.Spec.Resources.Limits = corev1.ResourceList{DefaultGPUResourceName: resource.MustParse(gpus)}
	}
	return ad
}

var seedQuota = agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 8, MaxTotalReplicas: 20, MaxReplicasPerAgent: 10}

func TestDemandOf(t *testing.T) {
	canary := func(ad *agentraxv1alpha1.AgentDeployment, weights ...int32) *agentraxv1alpha1.AgentDeployment {
		ad.Spec.Rollout = &agentraxv1alpha1.RolloutSpec{Strategy: agentraxv1alpha1.StrategyCanary,
			Traffic: &agentraxv1alpha1.TrafficSpec{RouteName: "r"}}
		for _, w := range weights {
			ad.Spec.Rollout.Steps = append(ad.Spec.Rollout.Steps, agentraxv1alpha1.RolloutStep{SetWeight: &w})
		}
		ad.Status.StableVersion = "img:v0"
		// The stable runs at replicas.max unless a case says otherwise.
		ad.Status.CurrentReplicas = ad.Spec.Replicas.Max
		return ad
	}
	running := func(ad *agentraxv1alpha1.AgentDeployment, current, baseline int32) *agentraxv1alpha1.AgentDeployment {
		ad.Status.CurrentReplicas, ad.Status.BaselineReplicas = current, baseline
		return ad
	}
	for name, tc := range map[string]struct {
		ad   *agentraxv1alpha1.AgentDeployment
		want Demand
	}{
		"no GPUs":              {agent(3, ""), Demand{Replicas: 3}},
		"seed agent":           {agent(10, "1"), Demand{Replicas: 10, GPUs: 10, GPUsPerPod: 1}},
		"two GPUs a pod":       {agent(4, "2"), Demand{Replicas: 4, GPUs: 8, GPUsPerPod: 2}},
		"fractional rounds up": {agent(2, "500m"), Demand{Replicas: 2, GPUs: 2, GPUsPerPod: 1}},
		"canary without weights charges one pod": {canary(agent(4, "2")),
			Demand{Replicas: 5, CanaryPods: 1, GPUs: 10, GPUsPerPod: 2, Canary: true}},
		"canary charged at its highest weight": {canary(agent(4, "2"), 25, 50, 100),
			Demand{Replicas: 8, CanaryPods: 4, GPUs: 16, GPUsPerPod: 2, Canary: true}},
		"canary weight rounds up": {canary(agent(5, ""), 10, 30),
			Demand{Replicas: 7, CanaryPods: 2, Canary: true}},
		// The canary is sized against the stable's replicas, not replicas.max: a stable the autoscaler holds at 2
		// of 10 gets a canary of at most 2 at weight 100, so 2 are charged, not 10.
		"canary charge follows the stable's actual replicas": {running(canary(agent(10, "1"), 50, 100), 2, 0),
			Demand{Replicas: 12, CanaryPods: 2, GPUs: 12, GPUsPerPod: 1, Canary: true}},
		"canary charge at a lower weight of the actual replicas": {running(canary(agent(10, ""), 10, 50), 5, 0),
			Demand{Replicas: 13, CanaryPods: 3, Canary: true}},
		// While the canary runs it is sized against the larger of the baseline and the stable's replicas (the
		// stable scaling down as traffic leaves it must not shrink the canary taking that traffic).
		"canary charge keeps the baseline while the stable shrinks": {running(canary(agent(10, ""), 100), 2, 6),
			Demand{Replicas: 16, CanaryPods: 6, Canary: true}},
		"a stable surging past replicas.max is charged at replicas.max": {running(canary(agent(4, ""), 100), 5, 0),
			Demand{Replicas: 8, CanaryPods: 4, Canary: true}},
		"a stable not observed yet is charged at replicas.min": {func() *agentraxv1alpha1.AgentDeployment {
			ad := running(canary(agent(10, ""), 100), 0, 0)
			ad.Spec.Replicas.Min = 3
			return ad
		}(), Demand{Replicas: 13, CanaryPods: 3, Canary: true}},
		"rolled-back image is not charged again": {func() *agentraxv1alpha1.AgentDeployment {
			ad := canary(agent(4, "1"), 100)
			ad.Status.AbortedVersion = ad.Spec.Image
			return ad
		}(), Demand{Replicas: 4, GPUs: 4, GPUsPerPod: 1}},
		"a retry of the rolled-back image is charged": {func() *agentraxv1alpha1.AgentDeployment {
			ad := canary(agent(4, "1"), 100)
			ad.Status.AbortedVersion, ad.Status.RetriedRollout = ad.Spec.Image, "1"
			ad.Annotations = map[string]string{agentraxv1alpha1.AnnotationRetryRollout: "2"}
			return ad
		}(), Demand{Replicas: 8, CanaryPods: 4, GPUs: 8, GPUsPerPod: 1, Canary: true}},
		"a retry value already acted on is not charged": {func() *agentraxv1alpha1.AgentDeployment {
			ad := canary(agent(4, "1"), 100)
			ad.Status.AbortedVersion, ad.Status.RetriedRollout = ad.Spec.Image, "2"
			ad.Annotations = map[string]string{agentraxv1alpha1.AnnotationRetryRollout: "2"}
			return ad
		}(), Demand{Replicas: 4, GPUs: 4, GPUsPerPod: 1}},
		// The controller never starts a canary without a route to send it traffic (RolloutHealthy NoTrafficRoute):
		// charging one would hold the charge for ever.
		"canary strategy without a traffic block is not charged": {func() *agentraxv1alpha1.AgentDeployment {
			ad := canary(agent(4, "1"), 100)
			ad.Spec.Rollout.Traffic = nil
			return ad
		}(), Demand{Replicas: 4, GPUs: 4, GPUsPerPod: 1}},
		"canary strategy, same image": {func() *agentraxv1alpha1.AgentDeployment {
			ad := canary(agent(4, "1"))
			ad.Status.StableVersion = ad.Spec.Image
			return ad
		}(), Demand{Replicas: 4, GPUs: 4, GPUsPerPod: 1}},
		"rollout in progress": {func() *agentraxv1alpha1.AgentDeployment {
			ad := agent(2, "1")
			ad.Status.Phase = agentraxv1alpha1.PhaseRolloutInProgress
			return ad
		}(), Demand{Replicas: 3, CanaryPods: 1, GPUs: 3, GPUsPerPod: 1, Canary: true}},
		"recreate never charges a canary": {func() *agentraxv1alpha1.AgentDeployment {
			ad := agent(2, "1")
			ad.Status.StableVersion = "img:v0"
			return ad
		}(), Demand{Replicas: 2, GPUs: 2, GPUsPerPod: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(DemandOf(tc.ad, DefaultGPUResourceName)).To(Equal(tc.want))
		})
	}
}

func res(name string, replicas int32, gpus int64) agentraxv1alpha1.Reservation {
	return agentraxv1alpha1.Reservation{Name: name, Replicas: replicas, GPUs: gpus}
}

func TestAdmit(t *testing.T) {
	d := func(replicas int32, perPod int64) Demand {
		return Demand{Replicas: replicas, GPUs: int64(replicas) * perPod, GPUsPerPod: perPod}
	}
	ptr := func(d Demand) *Demand { return &d }
	for name, tc := range map[string]struct {
		spec      agentraxv1alpha1.TenantQuotaSpec
		ledger    []agentraxv1alpha1.Reservation
		new       Demand
		old       *Demand
		wantErrs  []string
		wantEntry *agentraxv1alpha1.Reservation
	}{
		"seed agent refused by seed quota": {
			spec: seedQuota, new: d(10, 1),
			wantErrs: []string{`spec.resources.limits[nvidia.com/gpu]`, `"alpha-quota" maxGPUs`, "1 nvidia.com/gpu × 10 replicas", "= 10 > 8"},
		},
		"seed agent admitted with 10 GPUs": {
			spec: agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 10, MaxTotalReplicas: 20, MaxReplicasPerAgent: 10},
			new:  d(10, 1), wantEntry: &agentraxv1alpha1.Reservation{Name: "a", Replicas: 10, GPUs: 10},
		},
		"agents full": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("b", 1, 0), res("c", 1, 0), res("d", 1, 0), res("e", 1, 0), res("f", 1, 0)},
			new: d(1, 0), wantErrs: []string{"spec.tenantRef", "maxAgents: 5 agents admitted + 1 = 6 > 5"},
		},
		"total replicas": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("b", 10, 0), res("c", 8, 0)},
			new: d(3, 0), wantErrs: []string{"spec.replicas.max", "maxTotalReplicas: 18 reserved by other agents + 3 = 21 > 20"},
		},
		"exactly at the ceiling": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("b", 10, 4), res("c", 8, 2)},
			new: d(2, 1), wantEntry: &agentraxv1alpha1.Reservation{Name: "a", Replicas: 2, GPUs: 2},
		},
		"per agent": {
			spec: seedQuota, new: d(11, 0), wantErrs: []string{"spec.replicas.max", "maxReplicasPerAgent: replicas.max 11 > 10"},
		},
		"canary replica counts but not per agent": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("b", 10, 0)},
			new: Demand{Replicas: 13, CanaryPods: 3, Canary: true}, old: ptr(d(10, 0)),
			wantErrs: []string{"maxTotalReplicas: 10 reserved by other agents + 13, including 3 canary = 23 > 20"},
		},
		"update growing GPUs": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("a", 4, 4), res("b", 4, 4)},
			new: d(4, 2), old: ptr(d(4, 1)), wantErrs: []string{"maxGPUs: 4 reserved by other agents + 8", "= 12 > 8"},
		},
		"update reserves only the increase": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("a", 4, 4), res("b", 4, 4)},
			new: d(6, 0), old: ptr(d(4, 0)), wantEntry: &agentraxv1alpha1.Reservation{Name: "a", Replicas: 6, GPUs: 4},
		},
		"update over a lowered quota passes in dimensions it does not grow": {
			spec:   agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 1, MaxGPUs: 0, MaxTotalReplicas: 30, MaxReplicasPerAgent: 10},
			ledger: []agentraxv1alpha1.Reservation{res("a", 4, 4), res("b", 4, 4)},
			new:    Demand{Replicas: 5, GPUs: 4, GPUsPerPod: 1}, old: ptr(d(4, 1)),
			wantEntry: &agentraxv1alpha1.Reservation{Name: "a", Replicas: 5, GPUs: 4},
		},
		// Written again all the same, amounts kept: the write is the barrier against the TenantQuota controller
		// lowering the stale reservation from the spec it read before this update.
		"stale larger reservation already covers the growth": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("a", 8, 0)},
			new: d(6, 0), old: ptr(d(4, 0)), wantEntry: &agentraxv1alpha1.Reservation{Name: "a", Replicas: 8},
		},
		"update growing nothing writes nothing": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("a", 8, 0)},
			new: d(4, 0), old: ptr(d(6, 0)),
		},
		"create over an existing entry keeps the larger": {
			spec: seedQuota, ledger: []agentraxv1alpha1.Reservation{res("a", 2, 6)},
			new: d(3, 1), wantEntry: &agentraxv1alpha1.Reservation{Name: "a", Replicas: 3, GPUs: 6},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			dec := Admit(Request{Quota: `"alpha-quota"`, Spec: tc.spec, Ledger: tc.ledger, Name: "a",
				New: tc.new, Old: tc.old, GPUResource: DefaultGPUResourceName})
			if len(tc.wantErrs) > 0 {
				g.Expect(dec.Errors).NotTo(BeEmpty())
				g.Expect(dec.Reserve).To(BeNil())
				for _, want := range tc.wantErrs {
					g.Expect(dec.Errors.ToAggregate().Error()).To(ContainSubstring(want))
				}
				return
			}
			g.Expect(dec.Errors).To(BeEmpty())
			g.Expect(dec.Reserve).To(Equal(tc.wantEntry))
		})
	}
}

func TestSettle(t *testing.T) {
	canary := func(base, pods int32, perPod int64) Demand {
		return Demand{Replicas: base + pods, CanaryPods: pods, GPUs: perPod * int64(base+pods), GPUsPerPod: perPod, Canary: true}
	}
	for name, tc := range map[string]struct {
		d      Demand
		held   agentraxv1alpha1.Reservation
		others Usage
		want   Demand
	}{
		"no canary is taken as demanded":    {d: Demand{Replicas: 12}, held: res("a", 4, 0), others: Usage{Replicas: 15}, want: Demand{Replicas: 12}},
		"a shrinking canary charge":         {d: canary(10, 2, 0), held: res("a", 16, 0), want: canary(10, 2, 0)},
		"a growing canary charge with room": {d: canary(10, 6, 0), held: res("a", 12, 0), others: Usage{Replicas: 4}, want: canary(10, 6, 0)},
		"a growing canary charge grows only into the room": {d: canary(10, 8, 0), held: res("a", 12, 0),
			others: Usage{Replicas: 5}, want: canary(10, 5, 0)},
		"no room keeps what is held": {d: canary(10, 8, 0), held: res("a", 12, 0), others: Usage{Replicas: 10},
			want: canary(10, 2, 0)},
		"GPU room bounds it too": {d: canary(4, 4, 1), held: res("a", 5, 5), others: Usage{Replicas: 2, GPUs: 2},
			want: canary(4, 2, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Settle(tc.d, tc.held, seedQuota, tc.others)).To(Equal(tc.want))
		})
	}
}

func TestLedgerOperations(t *testing.T) {
	g := NewWithT(t)
	var l []agentraxv1alpha1.Reservation
	l = Upsert(l, res("c", 1, 1))
	l = Upsert(l, res("a", 2, 0))
	l = Upsert(l, res("b", 3, 3))
	g.Expect([]string{l[0].Name, l[1].Name, l[2].Name}).To(Equal([]string{"a", "b", "c"}))
	l = Upsert(l, res("b", 4, 4))
	g.Expect(LedgerUsage(l, "")).To(Equal(Usage{Agents: 3, Replicas: 7, GPUs: 5}))
	g.Expect(LedgerUsage(l, "b")).To(Equal(Usage{Agents: 2, Replicas: 3, GPUs: 1}))
	l = Remove(l, "a")
	l = Remove(l, "zzz")
	g.Expect(l).To(HaveLen(2))
	g.Expect(Find(l, "a")).To(Equal(-1))
}

func TestHPAMaxReplicas(t *testing.T) {
	for name, tc := range map[string]struct {
		minR, maxR int32
		spec       agentraxv1alpha1.TenantQuotaSpec
		others     int32
		want       Cap
	}{
		"uncapped":          {2, 10, seedQuota, 5, Cap{MaxReplicas: 10, Headroom: 15}},
		"per agent caps":    {2, 10, agentraxv1alpha1.TenantQuotaSpec{MaxTotalReplicas: 20, MaxReplicasPerAgent: 6}, 0, Cap{MaxReplicas: 6, Reduced: true, Headroom: 20}},
		"headroom caps":     {2, 10, seedQuota, 14, Cap{MaxReplicas: 6, Reduced: true, Headroom: 6}},
		"clamped to min":    {4, 10, seedQuota, 18, Cap{MaxReplicas: 4, Reduced: true, Clamped: true, Headroom: 2}},
		"negative headroom": {2, 10, agentraxv1alpha1.TenantQuotaSpec{MaxTotalReplicas: 5, MaxReplicasPerAgent: 10}, 9, Cap{MaxReplicas: 2, Reduced: true, Clamped: true, Headroom: -4}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(HPAMaxReplicas(tc.minR, tc.maxR, tc.spec, tc.others)).To(Equal(tc.want))
		})
	}
}

func TestExceededAndRatio(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Exceeded(seedQuota, Usage{Agents: 5, Replicas: 20, GPUs: 8}, 10)).To(BeEmpty())
	got := Exceeded(seedQuota, Usage{Agents: 6, Replicas: 21, GPUs: 9}, 11)
	g.Expect(Message(got)).To(Equal("agents 6 > maxAgents 5; GPUs 9 > maxGPUs 8; replicas 21 > maxTotalReplicas 20; " +
		"an agent's replicas.max 11 > maxReplicasPerAgent 10"))
	g.Expect(UsageRatio(seedQuota, Usage{Replicas: 5})).To(Equal(0.25))
	g.Expect(UsageRatio(agentraxv1alpha1.TenantQuotaSpec{}, Usage{Replicas: 5})).To(Equal(0.0))
}

func TestParseErrorRate(t *testing.T) {
	for in, want := range map[string]float64{"2%": 0.02, "0%": 0, "100%": 1, "0.5%": 0.005, "12.5%": 0.125, "007%": 0.07, ".5%": 0.005} {
		v, err := ParseErrorRate(in)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), in)
		NewWithT(t).Expect(v).To(BeNumerically("~", want, 1e-12), in)
	}
	for _, in := range []string{"", "2", "%", "-1%", "+1%", "101%", "2 %", " 2%", "2%%", "1e1%", "NaN%", "Inf%", "0x1%", "1.2.3%", ".%", "2.%x", "½%"} {
		_, err := ParseErrorRate(in)
		NewWithT(t).Expect(err).To(HaveOccurred(), "%q", in)
	}
}

func FuzzParseErrorRate(f *testing.F) {
	for _, s := range []string{"2%", "0.5%", "100%", "101%", "-1%", "1e2%", "NaN%", "", "%", "2", "99.999%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseErrorRate(s)
		if err != nil {
			return
		}
		if v < 0 || v > 1 || v != v {
			t.Fatalf("ParseErrorRate(%q) = %v, outside [0, 1]", s, v)
		}
		if !strings.HasSuffix(s, "%") || strings.ContainsAny(s, "+-eEx ") {
			t.Fatalf("ParseErrorRate(%q) accepted a non-plain percentage", s)
		}
	})
}

func FuzzAdmit(f *testing.F) {
	f.Add(int32(5), int64(8), int32(20), int32(10), int32(10), int64(1), int32(3), int64(2), int32(4), int64(1), true)
	f.Add(int32(1), int64(0), int32(1), int32(1), int32(1), int64(0), int32(0), int64(0), int32(1), int64(0), false)
	f.Fuzz(func(t *testing.T, maxAgents int32, maxGPUs int64, maxTotal, perAgent, newMax int32, perPod int64,
		otherReplicas int32, otherGPUs int64, oldMax int32, oldPerPod int64, create bool) {
		if maxAgents < 1 || maxTotal < 1 || perAgent < 1 || maxGPUs < 0 || newMax < 1 || oldMax < 1 || perPod < 0 || oldPerPod < 0 ||
			otherReplicas < 0 || otherGPUs < 0 || newMax > 1<<20 || oldMax > 1<<20 || perPod > 1<<20 || oldPerPod > 1<<20 ||
			otherReplicas > 1<<20 || otherGPUs > 1<<40 {
			return
		}
		spec := agentraxv1alpha1.TenantQuotaSpec{MaxAgents: maxAgents, MaxGPUs: maxGPUs, MaxTotalReplicas: maxTotal, MaxReplicasPerAgent: perAgent}
		ledger := []agentraxv1alpha1.Reservation{res("other", otherReplicas, otherGPUs)}
		newD := Demand{Replicas: newMax, GPUs: int64(newMax) * perPod, GPUsPerPod: perPod}
		req := Request{Quota: "q", Spec: spec, Ledger: ledger, Name: "a", New: newD, GPUResource: DefaultGPUResourceName}
		if !create {
			oldD := Demand{Replicas: oldMax, GPUs: int64(oldMax) * oldPerPod, GPUsPerPod: oldPerPod}
			req.Old = &oldD
			req.Ledger = append(req.Ledger, res("a", oldD.Replicas, oldD.GPUs))
		}
		dec := Admit(req)
		if dec.Reserve == nil || len(dec.Errors) > 0 {
			return
		}
		after := LedgerUsage(Upsert(append([]agentraxv1alpha1.Reservation(nil), req.Ledger...), *dec.Reserve), "")
		// Whatever an admission grows must fit after it.
		if create && (after.Agents > maxAgents || after.Replicas > maxTotal || after.GPUs > maxGPUs || newMax > perAgent) {
			t.Fatalf("create admitted over the quota: %+v with %+v", after, spec)
		}
		if !create && newD.Replicas > req.Old.Replicas && (after.Replicas > maxTotal || newMax > perAgent) {
			t.Fatalf("replica growth admitted over the quota: %+v with %+v", after, spec)
		}
		if !create && newD.GPUs > req.Old.GPUs && after.GPUs > maxGPUs {
			t.Fatalf("GPU growth admitted over the quota: %+v with %+v", after, spec)
		}
	})
}
