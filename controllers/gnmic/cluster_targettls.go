package gnmic

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

func targetTLSSecretName(c *gnmicv1alpha1.Cluster) string {
	return clusterResourceName(c) + "-target-tls"
}

// DefaultTargetTLSPropagation is how long a device TLS file newly added to the target-tls Secret is held back
// from the push: the kubelet refreshes a mounted Secret on its periodic pod sync (about a minute, plus its cache
// TTL), and gNMIc v0.47 crashes when a subscription is applied to a target whose TLS file does not exist yet.
const DefaultTargetTLSPropagation = 2 * time.Minute

// targetTLSAddedAnnotation records, on the target-tls Secret, when each of its keys was first written, as Unix
// seconds of the operator's own clock (no other clock is compared with it). A key written with the Secret itself
// is recorded as 0: the collector pods are created after it, so they mount the file from the start.
const targetTLSAddedAnnotation = "operator.gnmic.dev/target-tls-added"

// ensureTargetTLS gathers the CA bundles and client certificates of the namespace's TargetProfiles into the
// Cluster's target-tls Secret, one key per file (plan.TargetTLSFile), which the collectors mount at
// plan.TargetTLSDir: gNMIc takes these as file paths. The kubelet refreshes a mounted Secret in place, so a
// rotated CA or client certificate reaches the collectors without a restart (used from their next dial).
//
// It returns the profiles whose files are not in the pods, with why: the object a file comes from is missing, or
// the file was added less than TargetTLSPropagation ago. Their targets are left out of the push (a missing file
// crashes the collector), and settle says when the earliest held-back file is due.
func (r *ClusterReconciler) ensureTargetTLS(ctx context.Context, c *gnmicv1alpha1.Cluster,
	profiles map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile) (map[ktypes.NamespacedName]string, time.Duration, error) {
	data, needs, heldBack, err := r.gatherTargetTLS(ctx, profiles)
	if err != nil {
		return nil, 0, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: targetTLSSecretName(c)}}
	now := time.Now().Unix()
	var added map[string]int64
	if err := r.createOrUpdate(ctx, c, secret, func() {
		added = keysAdded(secret, data, now)
		secret.Labels = podLabels(c)
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = data
		raw, _ := json.Marshal(added)
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[targetTLSAddedAnnotation] = string(raw)
	}); err != nil {
		return nil, 0, err
	}
	propagation := r.TargetTLSPropagation
	if propagation <= 0 {
		propagation = DefaultTargetTLSPropagation
	}
	var settle time.Duration
	for profile, files := range needs {
		if _, missing := heldBack[profile]; missing {
			continue
		}
		for _, f := range files {
			if due := time.Duration(added[f]-now)*time.Second + propagation; added[f] != 0 && due > 0 {
				heldBack[profile] = fmt.Sprintf("waiting up to %s for the kubelet to write %s into the collector pods", propagation, f)
				if settle == 0 || due < settle {
					settle = due
				}
			}
		}
	}
	return heldBack, settle, nil
}

// keysAdded is the added-at record for data, carried over from the Secret as it is: a key the Secret already
// holds keeps its time, a new key is stamped now, and every key of a Secret not created yet is stamped 0.
func keysAdded(secret *corev1.Secret, data map[string][]byte, now int64) map[string]int64 {
	before := map[string]int64{}
	_ = json.Unmarshal([]byte(secret.Annotations[targetTLSAddedAnnotation]), &before)
	creating := secret.CreationTimestamp.IsZero()
	added := make(map[string]int64, len(data))
	for k := range data {
		_, held := secret.Data[k]
		switch at, known := before[k]; {
		case creating:
			added[k] = 0
		case held && known:
			added[k] = at
		case held:
			added[k] = 0 // written before this record existed
		default:
			added[k] = now
		}
	}
	return added
}

// gatherTargetTLS reads the TLS material of every profile: the Secret's data, the keys each profile needs, and
// the profiles whose material is missing, with why.
func (r *ClusterReconciler) gatherTargetTLS(ctx context.Context, profiles map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile) (
	data map[string][]byte, needs map[ktypes.NamespacedName][]string, heldBack map[ktypes.NamespacedName]string, err error) {
	data, needs, heldBack = map[string][]byte{}, map[ktypes.NamespacedName][]string{}, map[ktypes.NamespacedName]string{}
	keys := slices.SortedFunc(maps.Keys(profiles), func(a, b ktypes.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := profiles[k]
		t := p.Spec.TLS
		if t == nil {
			continue
		}
		if b := t.CABundle; b != nil {
			pem, from, err := r.caBundle(ctx, p.Namespace, b)
			if err != nil {
				return nil, nil, nil, err
			}
			file := plan.TargetTLSFile(p.Namespace, p.Name, plan.TargetTLSCA)
			needs[k] = append(needs[k], file)
			if len(pem) == 0 {
				heldBack[k] = "CA bundle " + from + " not found"
			} else {
				data[file] = pem
			}
		}
		if ref := t.ClientCertRef; ref != nil {
			cert, key := plan.TargetTLSFile(p.Namespace, p.Name, plan.TargetTLSCert), plan.TargetTLSFile(p.Namespace, p.Name, plan.TargetTLSPrivateKey)
			needs[k] = append(needs[k], cert, key)
			s := &corev1.Secret{}
			err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, s)
			switch {
			case err != nil && !apierrors.IsNotFound(err):
				return nil, nil, nil, err
			case err != nil || len(s.Data[corev1.TLSCertKey]) == 0 || len(s.Data[corev1.TLSPrivateKeyKey]) == 0:
				heldBack[k] = fmt.Sprintf("client certificate Secret/%s with %s and %s not found", ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			default:
				data[cert], data[key] = s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
			}
		}
	}
	return data, needs, heldBack, nil
}

// setTargetTLSCondition reports the held-back profiles in the Cluster's TargetTLSReady condition.
func setTargetTLSCondition(c *gnmicv1alpha1.Cluster, heldBack map[ktypes.NamespacedName]string) {
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionTargetTLSReady, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonTargetTLSInPlace, Message: "every TargetProfile's TLS files are in the collector pods",
		ObservedGeneration: c.Generation}
	if len(heldBack) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonTargetTLSHeldBack
		lines := make([]string, 0, len(heldBack))
		for _, k := range slices.SortedFunc(maps.Keys(heldBack), func(a, b ktypes.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
			lines = append(lines, "TargetProfile/"+k.Name+": "+heldBack[k])
		}
		cond.Message = "targets of these profiles are not pushed: " + strings.Join(lines, "; ")
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// caBundle reads a profile's CA bundle, and names the object it comes from; nil when the object or key does
// not exist.
func (r *ClusterReconciler) caBundle(ctx context.Context, namespace string, b *gnmicv1alpha1.CABundleSource) ([]byte, string, error) {
	if ref := b.SecretRef; ref != nil {
		from := "Secret/" + ref.Name + " key " + ref.BundleKey()
		s := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
			return nil, from, client.IgnoreNotFound(err)
		}
		return s.Data[ref.BundleKey()], from, nil
	}
	ref := b.ConfigMapRef
	from := "ConfigMap/" + ref.Name + " key " + ref.BundleKey()
	cm := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: namespace, Name: ref.Name}, cm); err != nil {
		return nil, from, client.IgnoreNotFound(err)
	}
	if v, ok := cm.Data[ref.BundleKey()]; ok {
		return []byte(v), from, nil
	}
	return cm.BinaryData[ref.BundleKey()], from, nil
}

// withTargetTLS mounts the target-tls Secret (optional, so pods start before it exists) into the collectors.
func withTargetTLS(tpl *corev1.PodTemplateSpec, c *gnmicv1alpha1.Cluster) {
	optional := true
	tpl.Spec.Volumes = append(tpl.Spec.Volumes, corev1.Volume{Name: "target-tls", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: targetTLSSecretName(c), Optional: &optional}}})
	ctr := &tpl.Spec.Containers[0]
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "target-tls", MountPath: plan.TargetTLSDir, ReadOnly: true})
}
