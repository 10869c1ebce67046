package collector

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// OpenShiftSecurityGroup is the API group whose presence marks an OpenShift cluster (SecurityContextConstraints).
const OpenShiftSecurityGroup = "security.openshift.io"

// PlatformAssignsUID reports whether a cluster serving these API groups assigns pod UIDs itself (OpenShift).
func PlatformAssignsUID(apiGroups []string) bool {
	return slices.Contains(apiGroups, OpenShiftSecurityGroup)
}

// PodSecurityContext is the security context of the collector pods. The defaults satisfy the restricted Pod
// Security standard; under UID assignment by the operator they also name a numeric non-root user, because the
// upstream gNMIc images run as root and the kubelet refuses runAsNonRoot on a root image without one
// (CreateContainerConfigError). platformAssignsUID is the cluster-wide detection; the template's uidAssignment
// wins over it, and every field the template's securityContext sets wins over the defaults.
func PodSecurityContext(tpl *gnmicv1alpha1.CollectorPodTemplate, platformAssignsUID bool) *corev1.PodSecurityContext {
	out := &corev1.PodSecurityContext{}
	if tpl != nil && tpl.SecurityContext != nil {
		out = tpl.SecurityContext.DeepCopy()
	}
	assignment := gnmicv1alpha1.UIDAssignmentOperator
	if platformAssignsUID {
		assignment = gnmicv1alpha1.UIDAssignmentPlatform
	}
	if tpl != nil && tpl.UIDAssignment != "" {
		assignment = tpl.UIDAssignment
	}
	if out.RunAsNonRoot == nil {
		out.RunAsNonRoot = ptr.To(true)
	}
	if out.SeccompProfile == nil {
		out.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
	if assignment == gnmicv1alpha1.UIDAssignmentOperator {
		if out.RunAsUser == nil {
			out.RunAsUser = ptr.To(gnmicv1alpha1.DefaultCollectorUID)
		}
		if out.RunAsGroup == nil {
			out.RunAsGroup = ptr.To(gnmicv1alpha1.DefaultCollectorUID)
		}
		if out.FSGroup == nil {
			out.FSGroup = ptr.To(gnmicv1alpha1.DefaultCollectorUID)
		}
	}
	return out
}
