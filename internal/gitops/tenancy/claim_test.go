package tenancy

import (
	"testing"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

func TestRefusal(t *testing.T) {
	for name, tc := range map[string]struct {
		ns   Namespace
		want string // "" when a tenant may hold it
	}{
		"ordinary":           {Namespace{Name: "team-a"}, ""},
		"system by name":     {Namespace{Name: "kube-public"}, "kube-public is a system or operator namespace"},
		"operator namespace": {Namespace{Name: "quartet-system"}, "quartet-system is a system or operator namespace"},
		"openshift run level": {Namespace{Name: "infra", Labels: map[string]string{"openshift.io/run-level": "0"}},
			"infra is a system namespace"},
		"platform": {Namespace{Name: "katastroma", Platforms: []string{"main"}},
			"namespace katastroma holds the gitops Platform main"},
		"cluster-bound service accounts": {Namespace{Name: "cert-manager", ClusterBound: []string{"cert-manager-controller"}},
			"ClusterRoleBinding cert-manager-controller"},
		"labelled for the tenant does not help": {Namespace{Name: "monitoring", ClusterBound: []string{"prometheus"},
			Labels: map[string]string{gitopsv1alpha1.LabelTenant: "team-a"}, Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: "team-a"}},
			"cluster-wide rights"},
	} {
		t.Run(name, func(t *testing.T) {
			got := Refusal(tc.ns, []string{"quartet-system"})
			if tc.want == "" {
				NewWithT(t).Expect(got).To(BeEmpty())
				return
			}
			NewWithT(t).Expect(got).To(ContainSubstring(tc.want))
		})
	}
}

func TestProofOf(t *testing.T) {
	label := map[string]string{gitopsv1alpha1.LabelTenant: "team-a"}
	for name, tc := range map[string]struct {
		ns   Namespace
		want Proof
	}{
		"unlabelled":              {Namespace{Name: "x"}, NotGiven},
		"granted without label":   {Namespace{Name: "x", Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: "team-a"}}, NotGiven},
		"another tenant's":        {Namespace{Name: "x", Labels: map[string]string{gitopsv1alpha1.LabelTenant: "team-b"}}, NotGiven},
		"created":                 {Namespace{Name: "x", Labels: label, Annotations: map[string]string{gitopsv1alpha1.AnnotationCreatedBy: "team-a"}}, Created},
		"granted":                 {Namespace{Name: "x", Labels: label, Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: "team-a"}}, Granted},
		"granted to another":      {Namespace{Name: "x", Labels: label, Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: "team-b"}}, LabelOnly},
		"label only (an upgrade)": {Namespace{Name: "x", Labels: label}, LabelOnly},
	} {
		t.Run(name, func(t *testing.T) { NewWithT(t).Expect(ProofOf(tc.ns, "team-a")).To(Equal(tc.want)) })
	}
}

func TestValidatePodSecurity(t *testing.T) {
	g := NewWithT(t)
	level := func(l string) *gitopsv1alpha1.Tenant {
		tn := tenant([]string{"a"})
		tn.Spec.PodSecurity = l
		return tn
	}
	g.Expect(PodSecurityLevel(level(""))).To(Equal("restricted"), "restricted by default")
	g.Expect(ValidatePodSecurity(level(""), false)).To(Succeed())
	g.Expect(ValidatePodSecurity(level("baseline"), false)).To(Succeed())
	g.Expect(ValidatePodSecurity(level("privileged"), false)).To(MatchError(ContainSubstring("spec.podSecurity: Forbidden")))
	g.Expect(ValidatePodSecurity(level("privileged"), true)).To(Succeed(), "the operator's flag allows it")
	g.Expect(ValidatePodSecurity(level("lax"), true)).To(MatchError(ContainSubstring("spec.podSecurity: Unsupported value")))
}
