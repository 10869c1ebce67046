package source

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Helm overrides live in a Secret of the target's namespace, never in the source target: values may hold
// credentials (a database password, an API token), and the source target is a ConfigMap that anyone allowed to
// read ConfigMaps there (the view role) can read, and the provisioner's and pruner's identities read ConfigMaps
// cluster-wide. Of the stages only the source handler reads Secrets of tenant namespaces; it hands the values to
// the renderer with the render call (pipeline.MDOverrides).
const (
	// AnnotationOverridesSecret, on a source target, names the Secret of its namespace that holds its Helm
	// overrides (key OverridesKey).
	AnnotationOverridesSecret = "katastroma.org/overrides-secret"
	// OverridesKey is the Secret key of the Helm values (YAML).
	OverridesKey = "overrides"
	// OverridesSecretSuffix names the overrides Secret the registration API and the migration write:
	// <target>-overrides.
	OverridesSecretSuffix = "-overrides"
	// legacyOverrides is the source target data key an earlier version kept the values in.
	legacyOverrides = "overrides"
)

// overrides reads a target's Helm values: from its overrides Secret, or the legacy data.overrides until the
// migration moved them.
func (h *Handler) overrides(ctx context.Context, t Target) (string, error) {
	if t.OverridesSecret == "" {
		return t.Overrides, nil
	}
	s := &corev1.Secret{}
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.OverridesSecret}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("overrides secret %s/%s (annotation %s) does not exist", t.Namespace,
				t.OverridesSecret, AnnotationOverridesSecret)
		}
		return "", err
	}
	// The Secret must say it is this target's: whoever may edit the source target but not read Secrets could
	// otherwise name any Secret of the namespace that has an "overrides" key and have it rendered into objects.
	if s.Labels[pipeline.LabelSourceTarget] != t.Name {
		return "", fmt.Errorf("overrides secret %s/%s (annotation %s) is not labelled %s=%s: a Secret is used as a "+
			"target's overrides only when it says so", t.Namespace, t.OverridesSecret, AnnotationOverridesSecret,
			pipeline.LabelSourceTarget, t.Name)
	}
	v, ok := s.Data[OverridesKey]
	if !ok {
		return "", fmt.Errorf("overrides secret %s/%s has no key %q", t.Namespace, t.OverridesSecret, OverridesKey)
	}
	return string(v), nil
}

var errNotTheTargets = errors.New("not the Secret of source target")

// writeOverridesSecret creates or updates the overrides Secret of source target name, refusing to overwrite a
// Secret the pipeline did not write for that target (an application's own).
func writeOverridesSecret(ctx context.Context, c client.Client, namespace, name, values string) (string, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + OverridesSecretSuffix}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, s, func() error {
		if !s.CreationTimestamp.IsZero() && s.Labels[pipeline.LabelSourceTarget] != name {
			return errNotTheTargets
		}
		s.Labels = mergeLabels(s.Labels, map[string]string{pipeline.LabelSourceTarget: name})
		s.Type = corev1.SecretTypeOpaque
		s.Data = map[string][]byte{OverridesKey: []byte(values)}
		return nil
	})
	if errors.Is(err, errNotTheTargets) {
		return "", fmt.Errorf("secret %s/%s exists and is %w %s", namespace, s.Name, errNotTheTargets, name)
	}
	return s.Name, err
}

// deleteOverridesSecret deletes the overrides Secret of source target name if the pipeline wrote it.
func deleteOverridesSecret(ctx context.Context, c client.Client, namespace, name string) error {
	s := &corev1.Secret{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name + OverridesSecretSuffix}, s)
	if err == nil && s.Labels[pipeline.LabelSourceTarget] == name {
		err = c.Delete(ctx, s)
	}
	return client.IgnoreNotFound(err)
}

// migrateOverrides moves the data.overrides of source targets an earlier version wrote into their overrides
// Secret and removes them from the ConfigMap (an update at its resourceVersion: a concurrent writer makes it
// conflict, and the next tick tries again). cms are updated in place.
func (h *Handler) migrateOverrides(ctx context.Context, cms []corev1.ConfigMap) {
	for i := range cms {
		cm := &cms[i]
		values, ok := cm.Data[legacyOverrides]
		if !ok || !cm.DeletionTimestamp.IsZero() {
			continue
		}
		if err := h.moveOverrides(ctx, cm, values); err != nil {
			log.FromContext(ctx).Info("moving the Helm overrides into a Secret failed; retried next tick",
				"sourceTarget", cm.Namespace+"/"+cm.Name, "reason", err.Error())
		}
	}
}

func (h *Handler) moveOverrides(ctx context.Context, cm *corev1.ConfigMap, values string) error {
	moved := cm.DeepCopy()
	delete(moved.Data, legacyOverrides)
	if values != "" {
		name, err := writeOverridesSecret(ctx, h.Client, cm.Namespace, cm.Name, values)
		if err != nil {
			return err
		}
		if moved.Annotations == nil {
			moved.Annotations = map[string]string{}
		}
		moved.Annotations[AnnotationOverridesSecret] = name
	}
	if err := h.Client.Update(ctx, moved); err != nil {
		return err
	}
	*cm = *moved
	return nil
}
