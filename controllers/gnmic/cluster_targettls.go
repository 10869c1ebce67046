package gnmic

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

func targetTLSSecretName(c *gnmicv1alpha1.Cluster) string {
	return clusterResourceName(c) + "-target-tls"
}

// ensureTargetTLS gathers the CA bundles and client certificates of the namespace's TargetProfiles into the
// Cluster's target-tls Secret, one key per file (plan.TargetTLSFile), which the collectors mount at
// plan.TargetTLSDir: gNMIc takes these as file paths. The kubelet refreshes a mounted Secret in place, so a
// rotated CA or client certificate reaches the collectors without a restart (used from their next dial). A missing
// object leaves its file out; the device's connection then fails with gNMIc's error in the Target's status.
func (r *ClusterReconciler) ensureTargetTLS(ctx context.Context, c *gnmicv1alpha1.Cluster, profiles map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile) error {
	data := map[string][]byte{}
	keys := make([]ktypes.NamespacedName, 0, len(profiles))
	for k := range profiles {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ktypes.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := profiles[k]
		t := p.Spec.TLS
		if t == nil {
			continue
		}
		if b := t.CABundle; b != nil {
			pem, err := r.caBundle(ctx, p.Namespace, b)
			if err != nil {
				return err
			}
			if pem != nil {
				data[plan.TargetTLSFile(p.Namespace, p.Name, plan.TargetTLSCA)] = pem
			}
		}
		if ref := t.ClientCertRef; ref != nil {
			s := &corev1.Secret{}
			err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, s)
			switch {
			case apierrors.IsNotFound(err):
				ctrl.LoggerFrom(ctx).Info("client certificate Secret not found", "profile", k, "secret", ref.Name)
			case err != nil:
				return err
			default:
				data[plan.TargetTLSFile(p.Namespace, p.Name, plan.TargetTLSCert)] = s.Data[corev1.TLSCertKey]
				data[plan.TargetTLSFile(p.Namespace, p.Name, plan.TargetTLSPrivateKey)] = s.Data[corev1.TLSPrivateKeyKey]
			}
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: targetTLSSecretName(c)}}
	return r.createOrUpdate(ctx, c, secret, func() {
		secret.Labels = podLabels(c)
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = data
	})
}

// caBundle reads a profile's CA bundle; nil when the object or key does not exist.
func (r *ClusterReconciler) caBundle(ctx context.Context, namespace string, b *gnmicv1alpha1.CABundleSource) ([]byte, error) {
	if ref := b.SecretRef; ref != nil {
		s := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return s.Data[ref.BundleKey()], nil
	}
	ref := b.ConfigMapRef
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: namespace, Name: ref.Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if v, ok := cm.Data[ref.BundleKey()]; ok {
		return []byte(v), nil
	}
	return cm.BinaryData[ref.BundleKey()], nil
}

// withTargetTLS mounts the target-tls Secret (optional, so pods start before it exists) into the collectors.
func withTargetTLS(tpl *corev1.PodTemplateSpec, c *gnmicv1alpha1.Cluster) {
	optional := true
	tpl.Spec.Volumes = append(tpl.Spec.Volumes, corev1.Volume{Name: "target-tls", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: targetTLSSecretName(c), Optional: &optional}}})
	ctr := &tpl.Spec.Containers[0]
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "target-tls", MountPath: plan.TargetTLSDir, ReadOnly: true})
}
