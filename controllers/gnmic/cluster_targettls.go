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

// targetTLSInUseAnnotation records, on the target-tls Secret, which keys the target configs being pushed name for
// each profile ("namespace/name" → file → key), so that after a rotation the old files stay until the new ones are
// in the pods.
const targetTLSInUseAnnotation = "operator.gnmic.dev/target-tls-in-use"

// targetTLSPushedAnnotation records, in the same form, the keys named by the last configuration every collector
// pod accepted. Those files stay in the Secret until a later push that no longer names them has reached every
// pod: a collector whose push failed keeps dialing with the files its configuration names.
const targetTLSPushedAnnotation = "operator.gnmic.dev/target-tls-pushed"

// ensureTargetTLS gathers the CA bundles and client certificates of the namespace's TargetProfiles into the
// Cluster's target-tls Secret, which the collectors mount at plan.TargetTLSDir: gNMIc takes these as file paths.
// Each key carries a digest of its content (plan.TargetTLSKey), so a rotated CA bundle or client certificate is a
// new file and a new path in the target configs: the collectors holding those targets get a changed target, and
// reconnect with the new files, instead of using them only from their next dial.
//
// A new file is used only once the kubelet has had TargetTLSPropagation to write it into the pods (gNMIc crashes
// applying a subscription to a target whose file is missing). Until then a rotated profile keeps the files it used
// (kept in the Secret meanwhile), and a profile whose files are new is held back: its targets are left out of the
// push. It returns the keys each profile's targets use, the held-back profiles with why, and when the earliest
// waiting file is due.
func (r *ClusterReconciler) ensureTargetTLS(ctx context.Context, c *gnmicv1alpha1.Cluster,
	profiles map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile) (*deviceTLS, error) {
	data, wanted, missing, err := r.gatherTargetTLS(ctx, profiles)
	if err != nil {
		return nil, err
	}
	heldBack := map[ktypes.NamespacedName]string{}
	lastGood := map[ktypes.NamespacedName]string{}
	propagation := r.TargetTLSPropagation
	if propagation <= 0 {
		propagation = DefaultTargetTLSPropagation
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: targetTLSSecretName(c)}}
	now := time.Now().Unix()
	var choice targetTLSChoice
	if err := r.createOrUpdate(ctx, c, secret, func() {
		previous := keysRecord(secret, targetTLSInUseAnnotation)
		recorded := map[string]int64{}
		_ = json.Unmarshal([]byte(secret.Annotations[targetTLSAddedAnnotation]), &recorded)
		added := keysAdded(secret, data, now)
		choice = chooseTargetTLS(wanted, previous, secret.Data, added, now, propagation)
		// A profile whose CA bundle or client certificate object is gone keeps the files it used while they are
		// still in the Secret: the last good material, rather than dropping every target of the profile.
		for profile, why := range missing {
			if prev := previous[profile.String()]; len(prev) > 0 && usable(prev, prev, secret.Data) {
				choice.inUse[profile] = prev
				lastGood[profile] = why
			} else {
				heldBack[profile] = why
			}
		}
		// The old files a rotated profile still uses stay, with when they were added, and so do the files the last
		// configuration every pod accepted names (dropped once a push without them has reached every pod).
		out := maps.Clone(data)
		keep := func(key string) {
			if _, ok := out[key]; !ok {
				if pem, stored := secret.Data[key]; stored {
					out[key], added[key] = pem, recorded[key]
				}
			}
		}
		for _, files := range choice.inUse {
			for _, key := range files {
				keep(key)
			}
		}
		for _, files := range keysRecord(secret, targetTLSPushedAnnotation) {
			for _, key := range files {
				keep(key)
			}
		}
		secret.Labels = podLabels(c)
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = out
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		raw, _ := json.Marshal(added)
		secret.Annotations[targetTLSAddedAnnotation] = string(raw)
		raw, _ = json.Marshal(recordOf(choice.inUse))
		secret.Annotations[targetTLSInUseAnnotation] = string(raw)
	}); err != nil {
		return nil, err
	}
	for profile, why := range choice.waiting {
		heldBack[profile] = why
	}
	current := make(map[string]bool, len(data))
	for key := range data {
		current[key] = true
	}
	return &deviceTLS{inUse: choice.inUse, heldBack: heldBack, lastGood: lastGood, settle: choice.settle, current: current}, nil
}

// deviceTLS is what ensureTargetTLS decided.
type deviceTLS struct {
	// inUse are the keys the profiles' targets name (plan.Snapshot.TargetTLS).
	inUse plan.TargetTLSKeys
	// heldBack are the profiles whose targets are left out of the push, with why.
	heldBack map[ktypes.NamespacedName]string
	// lastGood are the profiles whose TLS object is missing and whose targets keep the files they used, with why.
	lastGood map[ktypes.NamespacedName]string
	// settle is when the earliest waiting file is due.
	settle time.Duration
	// current are the keys of the profiles' current content.
	current map[string]bool
}

// targetTLSPushed records that every collector pod accepted a configuration naming the in-use keys, and drops the
// files kept only for pods that had not been given the new paths yet: every key neither in use nor of the current
// content (a newer file still waiting for its propagation time stays).
func (r *ClusterReconciler) targetTLSPushed(ctx context.Context, c *gnmicv1alpha1.Cluster, d *deviceTLS) error {
	secret := &corev1.Secret{}
	if err := r.Get(ctx, ktypes.NamespacedName{Namespace: c.Namespace, Name: targetTLSSecretName(c)}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	keep := maps.Clone(d.current)
	for _, files := range d.inUse {
		for _, key := range files {
			keep[key] = true
		}
	}
	raw, _ := json.Marshal(recordOf(d.inUse))
	changed := secret.Annotations[targetTLSPushedAnnotation] != string(raw)
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[targetTLSPushedAnnotation] = string(raw)
	for key := range secret.Data {
		if !keep[key] {
			delete(secret.Data, key)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	// An update (the verb the manager holds on Secrets) of the version just read: a conflict (the Secret changed
	// since) is retried by the reconcile's error path.
	return client.IgnoreNotFound(r.Update(ctx, secret))
}

// targetTLSChoice is which files each profile's targets use.
type targetTLSChoice struct {
	inUse plan.TargetTLSKeys
	// waiting are the profiles held back until their new files are in the pods, with why.
	waiting map[ktypes.NamespacedName]string
	// settle is when the earliest waiting file is due.
	settle time.Duration
}

// chooseTargetTLS picks, per profile, the files its targets use: the wanted ones (the current content) once each
// has been in the Secret for propagation, else the ones it used before (previous, "namespace/name" → file → key)
// while they are still in the Secret (stored), else none (waiting). added is when each wanted key was added (0:
// with the Secret, so in the pods from the start).
func chooseTargetTLS(wanted plan.TargetTLSKeys, previous map[string]map[string]string, stored map[string][]byte,
	added map[string]int64, now int64, propagation time.Duration) targetTLSChoice {
	choice := targetTLSChoice{inUse: plan.TargetTLSKeys{}, waiting: map[ktypes.NamespacedName]string{}}
	for profile, files := range wanted {
		var late string
		var due time.Duration
		for _, file := range slices.Sorted(maps.Keys(files)) {
			key := files[file]
			if d := time.Duration(added[key]-now)*time.Second + propagation; added[key] != 0 && d > 0 {
				late, due = key, max(due, d)
			}
		}
		if late == "" {
			choice.inUse[profile] = files
			continue
		}
		if choice.settle == 0 || due < choice.settle {
			choice.settle = due
		}
		prev := previous[profile.String()]
		if prev == nil {
			// Written by a version without content digests: its unversioned files are what the pods have.
			prev = map[string]string{}
			for file := range files {
				prev[file] = plan.TargetTLSFile(profile.Namespace, profile.Name, file)
			}
		}
		if usable(prev, files, stored) {
			choice.inUse[profile] = prev
			continue
		}
		choice.waiting[profile] = fmt.Sprintf("waiting up to %s for the kubelet to write %s into the collector pods", propagation, late)
	}
	return choice
}

// usable reports whether the files a profile used before cover every file it needs now and are all still stored.
func usable(prev, needed map[string]string, stored map[string][]byte) bool {
	if len(prev) == 0 {
		return false
	}
	for file := range needed {
		key, ok := prev[file]
		if !ok {
			return false
		}
		if _, ok := stored[key]; !ok {
			return false
		}
	}
	return true
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

// gatherTargetTLS reads the TLS material of every profile: the Secret data it makes (versioned key → PEM), the
// keys each profile wants (file → key), and the profiles whose material is missing, with why.
func (r *ClusterReconciler) gatherTargetTLS(ctx context.Context, profiles map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile) (
	data map[string][]byte, wanted plan.TargetTLSKeys, heldBack map[ktypes.NamespacedName]string, err error) {
	data, wanted, heldBack = map[string][]byte{}, plan.TargetTLSKeys{}, map[ktypes.NamespacedName]string{}
	keys := slices.SortedFunc(maps.Keys(profiles), func(a, b ktypes.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		p := profiles[k]
		t := p.Spec.TLS
		if t == nil {
			continue
		}
		files := map[string][]byte{}
		if b := t.CABundle; b != nil {
			pem, from, err := r.caBundle(ctx, p.Namespace, b)
			if err != nil {
				return nil, nil, nil, err
			}
			if len(pem) == 0 {
				heldBack[k] = "CA bundle " + from + " not found"
			}
			files[plan.TargetTLSCA] = pem
		}
		if ref := t.ClientCertRef; ref != nil {
			s := &corev1.Secret{}
			err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, s)
			switch {
			case err != nil && !apierrors.IsNotFound(err):
				return nil, nil, nil, err
			case err != nil || len(s.Data[corev1.TLSCertKey]) == 0 || len(s.Data[corev1.TLSPrivateKeyKey]) == 0:
				heldBack[k] = fmt.Sprintf("client certificate Secret/%s with %s and %s not found", ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			default:
				files[plan.TargetTLSCert], files[plan.TargetTLSPrivateKey] = s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
			}
		}
		if _, missing := heldBack[k]; missing || len(files) == 0 {
			continue
		}
		wanted[k] = map[string]string{}
		for file, pem := range files {
			key := plan.TargetTLSKey(p.Namespace, p.Name, file, pem)
			wanted[k][file], data[key] = key, pem
		}
	}
	return data, wanted, heldBack, nil
}

// setTargetTLSCondition reports the held-back profiles, and those kept on their last good files, in the Cluster's
// TargetTLSReady condition; a Warning event when a profile starts using its last good files.
func (r *ClusterReconciler) setTargetTLSCondition(c *gnmicv1alpha1.Cluster, heldBack, lastGood map[ktypes.NamespacedName]string) {
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionTargetTLSReady, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonTargetTLSInPlace, Message: "every TargetProfile's TLS files are in the collector pods",
		ObservedGeneration: c.Generation}
	describe := func(m map[ktypes.NamespacedName]string) string {
		lines := make([]string, 0, len(m))
		for _, k := range slices.SortedFunc(maps.Keys(m), func(a, b ktypes.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
			lines = append(lines, "TargetProfile/"+k.Name+": "+m[k])
		}
		return strings.Join(lines, "; ")
	}
	var parts []string
	if len(heldBack) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonTargetTLSHeldBack
		parts = append(parts, "targets of these profiles are not pushed: "+describe(heldBack))
	}
	if len(lastGood) > 0 {
		if cond.Status == metav1.ConditionTrue {
			cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonTargetTLSLastGood
		}
		msg := "targets of these profiles keep their last good TLS files: " + describe(lastGood)
		parts = append(parts, msg)
		if old := meta.FindStatusCondition(c.Status.Conditions, cond.Type); old == nil || !strings.Contains(old.Message, msg) {
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, gnmicv1alpha1.ReasonTargetTLSLastGood, "Push", msg)
		}
	}
	if len(parts) > 0 {
		cond.Message = strings.Join(parts, "; ")
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

// keysRecord reads a profile → file → key record annotation of the target-tls Secret.
func keysRecord(secret *corev1.Secret, annotation string) map[string]map[string]string {
	out := map[string]map[string]string{}
	_ = json.Unmarshal([]byte(secret.Annotations[annotation]), &out)
	return out
}

// recordOf is keys in the annotations' form ("namespace/name" → file → key).
func recordOf(keys plan.TargetTLSKeys) map[string]map[string]string {
	out := make(map[string]map[string]string, len(keys))
	for profile, files := range keys {
		out[profile.String()] = files
	}
	return out
}
