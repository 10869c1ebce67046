package collector

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func TestPodSecurityContext(t *testing.T) {
	uid := gnmicv1alpha1.DefaultCollectorUID
	for _, tc := range []struct {
		name               string
		tpl                *gnmicv1alpha1.CollectorPodTemplate
		platformAssignsUID bool
		wantUser, wantGrp  *int64
		wantFSGroup        *int64
		wantNonRoot        bool
	}{
		{name: "Kubernetes: a fixed non-root UID the kubelet accepts on a root image",
			wantUser: &uid, wantGrp: &uid, wantFSGroup: &uid, wantNonRoot: true},
		{name: "OpenShift detected: no UID, the SCC assigns one", platformAssignsUID: true, wantNonRoot: true},
		{name: "explicit Platform on Kubernetes", tpl: &gnmicv1alpha1.CollectorPodTemplate{UIDAssignment: "Platform"},
			wantNonRoot: true},
		{name: "explicit Operator on OpenShift", platformAssignsUID: true,
			tpl:      &gnmicv1alpha1.CollectorPodTemplate{UIDAssignment: "Operator"},
			wantUser: &uid, wantGrp: &uid, wantFSGroup: &uid, wantNonRoot: true},
		{name: "securityContext fields win one by one", tpl: &gnmicv1alpha1.CollectorPodTemplate{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}},
			wantUser: ptr.To[int64](1000), wantGrp: &uid, wantFSGroup: &uid, wantNonRoot: true},
		{name: "a UID set on OpenShift is kept (the user chose it)", platformAssignsUID: true,
			tpl:      &gnmicv1alpha1.CollectorPodTemplate{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000680000)}},
			wantUser: ptr.To[int64](1000680000), wantNonRoot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := PodSecurityContext(tc.tpl, tc.platformAssignsUID)
			g.Expect(got.RunAsUser).To(Equal(tc.wantUser))
			g.Expect(got.RunAsGroup).To(Equal(tc.wantGrp))
			g.Expect(got.FSGroup).To(Equal(tc.wantFSGroup))
			g.Expect(*got.RunAsNonRoot).To(Equal(tc.wantNonRoot))
			g.Expect(got.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		})
	}
}

func TestPodSecurityContextDoesNotAlterTheSpec(t *testing.T) {
	g := NewWithT(t)
	tpl := &gnmicv1alpha1.CollectorPodTemplate{SecurityContext: &corev1.PodSecurityContext{}}
	_ = PodSecurityContext(tpl, false)
	g.Expect(tpl.SecurityContext.RunAsUser).To(BeNil())
}

func TestPlatformAssignsUID(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PlatformAssignsUID([]string{"apps", "security.openshift.io"})).To(BeTrue())
	g.Expect(PlatformAssignsUID([]string{"apps", "security.istio.io"})).To(BeFalse())
}
