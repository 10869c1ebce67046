// Package clustertest runs internal/webhookcert against a real API server. It is a package of its own so the
// fuzz workers of internal/webhookcert never start a control plane each.
package clustertest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	. "github.com/quartet-dev/quartet-operator/internal/webhookcert"
)

// env is a bare API server: the operator's own webhook configurations stay out, the test creates its own.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	e, err := testenv.Start(testenv.Options{WithoutOperator: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	return m.Run()
}

func TestConcurrentStartsConvergeOnOneSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := Config{SecretName: "converge-cert", Namespace: "default", Service: "webhook-service"}
	cfg.ValidatingConfigurations, cfg.MutatingConfigurations = createConfigurations(t, "converge")

	const replicas = 3
	// Hold every Create until each replica has read the Secret (absent): all of them then race to create it.
	racing := raceOnCreate(t, replicas)
	dirs := make([]string, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		dirs[i] = filepath.Join(t.TempDir(), "serving-certs")
		replica := cfg
		replica.CertDir = dirs[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Ensure(ctx, racing, replica, time.Now())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.SecretName}, secret)).To(Succeed())
	for _, dir := range dirs {
		served, err := os.ReadFile(filepath.Join(dir, KeyCert))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(served).To(Equal(secret.Data[KeyCert]), "every replica serves the Secret's certificate")
	}
	for _, bundle := range caBundles(g, cfg.ValidatingConfigurations[0], cfg.MutatingConfigurations[0]) {
		expectVerifies(g, bundle, secret.Data[KeyCert], cfg.DNSNames())
	}
}

// raceOnCreate is env.Client whose Creates wait until replicas Gets have been answered.
func raceOnCreate(t *testing.T, replicas int32) client.Client {
	t.Helper()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int32
	allRead := make(chan struct{})
	return interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if gets.Add(1) == replicas {
				close(allRead)
			}
			return err
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			select {
			case <-allRead:
			case <-time.After(30 * time.Second):
				return fmt.Errorf("the replicas never all read the Secret")
			}
			return c.Create(ctx, obj, opts...)
		},
	})
}

func TestEnsureRenewsTheServingCertificateUnderTheSameCA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := Config{SecretName: "renew-cert", Namespace: "default", Service: "webhook-service",
		CertDir: filepath.Join(t.TempDir(), "certs")}
	cfg.ValidatingConfigurations, cfg.MutatingConfigurations = createConfigurations(t, "renew")
	start := time.Now()
	due, err := Ensure(ctx, env.Client, cfg, start)
	g.Expect(err).NotTo(HaveOccurred())
	first := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.SecretName}, first)).To(Succeed())

	_, err = Ensure(ctx, env.Client, cfg, due.Add(time.Minute))
	g.Expect(err).NotTo(HaveOccurred())
	renewed := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.SecretName}, renewed)).To(Succeed())
	g.Expect(renewed.Data[KeyCACert]).To(Equal(first.Data[KeyCACert]))
	g.Expect(renewed.Data[KeyCert]).NotTo(Equal(first.Data[KeyCert]))
	served, err := os.ReadFile(filepath.Join(cfg.CertDir, KeyCert))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served).To(Equal(renewed.Data[KeyCert]))
}

func TestEnsureNamesAMissingConfiguration(t *testing.T) {
	g := NewWithT(t)
	cfg := Config{SecretName: "missing-cert", Namespace: "default", Service: "webhook-service",
		MutatingConfigurations: []string{"no-such-configuration"}, CertDir: t.TempDir()}
	_, err := Ensure(context.Background(), env.Client, cfg, time.Now())
	g.Expect(err).To(MatchError(ContainSubstring("MutatingWebhookConfiguration no-such-configuration")))
}

// createConfigurations creates a validating and a mutating configuration of two webhooks each, with no caBundle,
// matching a group nothing serves so they never get in the way.
func createConfigurations(t *testing.T, prefix string) (validatingNames, mutatingNames []string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	clientConfig := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: "default", Name: "webhook-service", Path: ptr.To("/validate")}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	failure := admissionregistrationv1.Ignore
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-validating"}}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-mutating"}}
	for _, name := range []string{"a.example.invalid", "b.example.invalid"} {
		validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: name,
			ClientConfig: clientConfig, Rules: rules, SideEffects: &sideEffects, FailurePolicy: &failure,
			AdmissionReviewVersions: []string{"v1"}})
		mutating.Webhooks = append(mutating.Webhooks, admissionregistrationv1.MutatingWebhook{Name: name,
			ClientConfig: clientConfig, Rules: rules, SideEffects: &sideEffects, FailurePolicy: &failure,
			AdmissionReviewVersions: []string{"v1"}})
	}
	for _, obj := range []client.Object{validating, mutating} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	return []string{validating.Name}, []string{mutating.Name}
}

// caBundles returns the caBundle of every webhook of the two configurations.
func caBundles(g Gomega, validatingName, mutatingName string) [][]byte {
	ctx := context.Background()
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: validatingName}, validating)).To(Succeed())
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, mutating)).To(Succeed())
	var bundles [][]byte
	for _, w := range validating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range mutating.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	g.Expect(bundles).To(HaveLen(4))
	return bundles
}

// expectVerifies checks that the API server, trusting bundle, would accept servingPEM for the Service.
func expectVerifies(g Gomega, bundle, servingPEM []byte, dnsNames []string) {
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(bundle)).To(BeTrue(), "caBundle holds a PEM certificate")
	block, _ := pem.Decode(servingPEM)
	g.Expect(block).NotTo(BeNil())
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range dnsNames {
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name})
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
}

// TestKeeperRepairsAReappliedConfiguration: a configuration re-applied without its caBundle (what Argo CD or
// `kubectl apply` of the chart does) gets the CA back within a minute, from a Keeper running under an identity
// that may only get/list/watch/patch those two configurations by name and read the Secret.
func TestKeeperRepairsAReappliedConfiguration(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := Config{SecretName: "keeper-cert", Namespace: "default", Service: "webhook-service",
		CertDir: filepath.Join(t.TempDir(), "certs")}
	cfg.ValidatingConfigurations, cfg.MutatingConfigurations = createConfigurations(t, "keeper")
	_, err := Ensure(ctx, env.Client, cfg, time.Now())
	g.Expect(err).NotTo(HaveOccurred())

	keeperClient := restrictedClient(t, "keeper", cfg)
	keeper := &Keeper{Client: keeperClient, Config: cfg, Retry: time.Second}
	go func() { _ = keeper.Start(ctx) }()

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.SecretName}, secret)).To(Succeed())
	for _, reset := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{},
	} {
		name := cfg.ValidatingConfigurations[0]
		if _, ok := reset.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			name = cfg.MutatingConfigurations[0]
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, reset)).To(Succeed())
		setCABundles(reset, nil)
		g.Expect(env.Client.Update(ctx, reset)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, bundle := range caBundles(g, cfg.ValidatingConfigurations[0], cfg.MutatingConfigurations[0]) {
			g.Expect(bundle).To(Equal(secret.Data[KeyCACert]))
		}
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
}

func setCABundles(obj client.Object, ca []byte) {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			o.Webhooks[i].ClientConfig.CABundle = ca
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			o.Webhooks[i].ClientConfig.CABundle = ca
		}
	}
}

// restrictedClient is a client impersonating user, granted what the operator's RBAC grants the certificate code:
// the two configurations by name and the Secret.
func restrictedClient(t *testing.T, user string, cfg Config) client.WithWatch {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	names := append(append([]string{}, cfg.ValidatingConfigurations...), cfg.MutatingConfigurations...)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user + "-webhookcert"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
		Verbs:     []string{"get", "patch", "list", "watch"}, ResourceNames: names,
	}, {
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{cfg.SecretName},
	}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-webhookcert"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	rc := rest.CopyConfig(env.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.NewWithWatch(rc, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}
