// Package webhookcert lets the manager serve its admission webhooks — and the agentrax MCP registry — with a
// certificate it generates itself: a CA and a serving certificate kept in one Secret of the operator's namespace,
// written into the server's certificate directory, and the CA put into the caBundle of the webhook configurations
// (for the registry: published in a ConfigMap its clients mount). No cert-manager and no Helm hook is needed; every
// replica runs it at start and they all converge on the Secret the first one created.
package webhookcert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

// The Secret lives in the operator's namespace: a marker with namespace= makes a Role there (config/rbac/role.yaml,
// the CSV's namespaced permissions), bound by config/rbac/role_binding.yaml. The configuration names are those
// config/default's namePrefix gives (and the chart keeps).
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch;list;watch,resourceNames=quartet-operator-validating-webhook-configuration
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;patch;list;watch,resourceNames=quartet-operator-mutating-webhook-configuration

// Keys of the Secret. tls.crt and tls.key make it usable as a kubernetes.io/tls Secret; the CA key stays in it
// so a replica can renew the serving certificate without changing the CA the API server trusts.
const (
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyCert   = corev1.TLSCertKey
	KeyKey    = corev1.TLSPrivateKeyKey
)

// Config names what the manager manages.
type Config struct {
	// SecretName is the Secret in Namespace holding the CA and the serving certificate.
	SecretName string
	Namespace  string
	// Service is the webhook Service; the certificate names <Service>.<Namespace>.svc and its cluster.local form.
	Service string
	// ValidatingConfigurations and MutatingConfigurations are the webhook configurations whose webhooks get the CA
	// as caBundle. Two lists, so each is read only as its kind: the RBAC grant names each under its own kind.
	ValidatingConfigurations []string
	MutatingConfigurations   []string
	// CertDir receives tls.crt and tls.key for the webhook server.
	CertDir string
	// CAConfigMap, when set, is a ConfigMap in Namespace that gets the CA certificate under ca.crt: clients that
	// are not the API server (the registry's writers) trust the serving certificate through it.
	CAConfigMap string
	// Purpose names what is served, in the CA's common name and in errors; empty means "webhook".
	Purpose string
	// Flags names the flags that set SecretName, Service and CertDir, for Validate; empty names the webhook's.
	Flags Flags
}

// Flags names the manager flags behind a Config, so an error says which flag to set.
type Flags struct{ Secret, Service, CertDir string }

// webhookFlags are the flags of the webhook certificate, the default of Config.Flags.
var webhookFlags = Flags{Secret: "--webhook-cert-secret", Service: "--webhook-service", CertDir: "--webhook-cert-dir"}

func (c Config) purpose() string {
	if c.Purpose == "" {
		return "webhook"
	}
	return c.Purpose
}

// caName is the CA's common name: one per purpose, so a client trusting the registry's CA trusts nothing the
// webhook CA signed.
func (c Config) caName() string { return "quartet-operator-" + c.purpose() + "-ca" }

// Validate names the first missing setting.
func (c Config) Validate() error {
	flags := c.Flags
	if flags == (Flags{}) {
		flags = webhookFlags
	}
	for _, f := range []struct{ flag, value string }{
		{flags.Secret, c.SecretName}, {"namespace (POD_NAMESPACE)", c.Namespace},
		{flags.Service, c.Service}, {flags.CertDir, c.CertDir},
	} {
		if f.value == "" {
			return fmt.Errorf("%s certificate management needs %s", c.purpose(), f.flag)
		}
	}
	return nil
}

// DNSNames are the names the serving certificate must carry.
func (c Config) DNSNames() []string {
	svc := c.Service + "." + c.Namespace + ".svc"
	return []string{svc, svc + ".cluster.local"}
}

// Action is what Decide says to do with the Secret's contents.
type Action int

const (
	// Reuse keeps the Secret as it is.
	Reuse Action = iota
	// RenewServing keeps the CA (so the caBundle stays valid) and issues a new serving certificate.
	RenewServing
	// Regenerate creates a new CA and a new serving certificate.
	Regenerate
)

func (a Action) String() string {
	return [...]string{"reuse", "renew serving certificate", "regenerate CA and serving certificate"}[a]
}

// Decide is what the Secret's data needs at now: nothing, a new serving certificate, or a new CA as well.
func Decide(data map[string][]byte, dnsNames []string, now time.Time) Action {
	ca := certs.Pair{CertPEM: data[KeyCACert], KeyPEM: data[KeyCAKey]}
	if !certs.CAValid(ca, now) {
		return Regenerate
	}
	if !certs.ServingValid(ca, certs.Pair{CertPEM: data[KeyCert], KeyPEM: data[KeyKey]}, dnsNames, now) {
		return RenewServing
	}
	return Reuse
}

// issue returns data with what action asks for replaced; a new CA is called caName.
func issue(data map[string][]byte, action Action, caName string, dnsNames []string, now time.Time) (map[string][]byte, error) {
	ca := certs.Pair{CertPEM: data[KeyCACert], KeyPEM: data[KeyCAKey]}
	if action == Regenerate {
		var err error
		if ca, err = certs.NewCA(caName, now); err != nil {
			return nil, err
		}
	}
	serving, err := certs.IssueServing(ca, dnsNames, now)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyCACert: ca.CertPEM, KeyCAKey: ca.KeyPEM, KeyCert: serving.CertPEM, KeyKey: serving.KeyPEM}, nil
}

// Ensure makes the Secret hold a valid CA and serving certificate, writes the serving certificate into CertDir and
// puts the CA into the configurations' caBundle and the CAConfigMap. It returns when the serving certificate is next
// due for renewal.
// Another replica writing the Secret at the same moment makes this one re-read it and take what it wrote.
func Ensure(ctx context.Context, c client.Client, cfg Config, now time.Time) (time.Time, error) {
	if err := cfg.Validate(); err != nil {
		return time.Time{}, err
	}
	data, err := ensureSecret(ctx, c, cfg, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s certificate Secret %s/%s: %w", cfg.purpose(), cfg.Namespace, cfg.SecretName, err)
	}
	if err := writeCertDir(cfg.CertDir, data); err != nil {
		return time.Time{}, fmt.Errorf("writing the %s certificate into %s: %w", cfg.purpose(), cfg.CertDir, err)
	}
	if cfg.CAConfigMap != "" {
		if err := publishCA(ctx, c, cfg, data[KeyCACert]); err != nil {
			return time.Time{}, fmt.Errorf("%s CA ConfigMap %s/%s: %w", cfg.purpose(), cfg.Namespace, cfg.CAConfigMap, err)
		}
	}
	for _, name := range cfg.ValidatingConfigurations {
		if err := patchCABundle(ctx, c, &admissionregistrationv1.ValidatingWebhookConfiguration{}, name, data[KeyCACert]); err != nil {
			return time.Time{}, err
		}
	}
	for _, name := range cfg.MutatingConfigurations {
		if err := patchCABundle(ctx, c, &admissionregistrationv1.MutatingWebhookConfiguration{}, name, data[KeyCACert]); err != nil {
			return time.Time{}, err
		}
	}
	return certs.RenewAt(data[KeyCert])
}

// ensureSecret converges on one Secret: a lost create or update race is resolved by reading the winner's.
func ensureSecret(ctx context.Context, c client.Client, cfg Config, now time.Time) (map[string][]byte, error) {
	const attempts = 5
	for range attempts {
		secret := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.SecretName}, secret)
		switch {
		case apierrors.IsNotFound(err):
			data, err := issue(nil, Regenerate, cfg.caName(), cfg.DNSNames(), now)
			if err != nil {
				return nil, err
			}
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.SecretName,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "quartet-operator"}},
				Type: corev1.SecretTypeTLS, Data: data,
			}
			if err := c.Create(ctx, secret); apierrors.IsAlreadyExists(err) {
				continue
			} else if err != nil {
				return nil, err
			}
			return data, nil
		case err != nil:
			return nil, err
		}
		action := Decide(secret.Data, cfg.DNSNames(), now)
		if action == Reuse {
			return secret.Data, nil
		}
		data, err := issue(secret.Data, action, cfg.caName(), cfg.DNSNames(), now)
		if err != nil {
			return nil, err
		}
		// Keep other keys (a Secret cert-manager left behind, say); the type is immutable, so it stays too.
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		for k, v := range data {
			secret.Data[k] = v
		}
		if err := c.Update(ctx, secret); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		return data, nil
	}
	return nil, fmt.Errorf("still contended after %d attempts", attempts)
}

// writeCertDir replaces tls.crt and tls.key by renames, so the webhook server's certificate watcher never
// reads half a file. The key goes first: a watcher reloading on the certificate then finds the matching key.
func writeCertDir(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, key := range []string{KeyKey, KeyCert} {
		path := filepath.Join(dir, key)
		if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, data[key]) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+key+"-*")
		if err != nil {
			return err
		}
		_, werr := tmp.Write(data[key])
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			_ = os.Remove(tmp.Name())
			return err
		}
	}
	return nil
}

// patchCABundle sets caBundle on every webhook of the configuration obj's kind called name.
func patchCABundle(ctx context.Context, c client.Client, obj client.Object, name string, caPEM []byte) error {
	kind := fmt.Sprintf("%T", obj)[len("*v1."):]
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		base := obj.DeepCopyObject().(client.Object)
		if !setCABundle(obj, caPEM) {
			return nil
		}
		return c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("caBundle of %s %s: %w", kind, name, err)
	}
	return nil
}

// setCABundle reports whether any webhook's caBundle changed.
func setCABundle(obj client.Object, caPEM []byte) bool {
	changed := false
	set := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if !bytes.Equal(cc.CABundle, caPEM) {
			cc.CABundle, changed = caPEM, true
		}
	}
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			set(&o.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			set(&o.Webhooks[i].ClientConfig)
		}
	}
	return changed
}
