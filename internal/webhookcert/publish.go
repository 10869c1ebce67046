package webhookcert

import (
	"bytes"
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The CA ConfigMap lives in the operator's namespace. It needs no rule of its own: only the registry publishes one,
// and the registry's state ConfigMap (agentrax-registry, same namespace) already needs the agentrax group's
// ConfigMap rights (get, create, update among them; docs/install.md, Permissions).

// KeyCABundle is the CAConfigMap's key: the CA certificate in PEM, the name kube-root-ca.crt and trust-manager use.
const KeyCABundle = "ca.crt"

// publishCA makes cfg.CAConfigMap hold caPEM under ca.crt. Other keys are left alone; a lost race re-reads.
func publishCA(ctx context.Context, c client.Client, cfg Config, caPEM []byte) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.CAConfigMap}, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.CAConfigMap,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "quartet-operator"}},
				Data: map[string]string{KeyCABundle: string(caPEM)},
			}
			err = c.Create(ctx, cm)
			if apierrors.IsAlreadyExists(err) {
				// Another replica created it: retry as a conflict, which reads what it wrote.
				return apierrors.NewConflict(corev1.Resource("configmaps"), cfg.CAConfigMap, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if bytes.Equal([]byte(cm.Data[KeyCABundle]), caPEM) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[KeyCABundle] = string(caPEM)
		return c.Update(ctx, cm)
	})
}
