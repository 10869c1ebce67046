package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// as is a client that acts as user (impersonation), so admission sees that user's userInfo.
func as(t *testing.T, user string) client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

// allowGNMIc lets user write every gnmic kind in ns (RBAC) and nothing else, so only admission decides.
func allowGNMIc(t *testing.T, ns, user string) {
	g := NewWithT(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gnmic-editor"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{gnmicv1alpha1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}}
	if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	bind(t, ns, "gnmic-"+user, "ClusterRole", "gnmic-editor", user)
}

func bind(t *testing.T, ns, name, kind, role, user string) {
	NewWithT(t).Expect(env.Client.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})).To(Succeed())
}

// grantSecret lets user get (only) Secret name in ns.
func grantSecret(t *testing.T, ns, user, name string) {
	NewWithT(t).Expect(env.Client.Create(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-" + name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get"}}}})).To(Succeed())
	bind(t, ns, user+"-reads-"+name, "Role", "read-"+name, user)
}

// expectRefused wants a 403 from admission that names the field and the Secret the user may not read.
func expectRefused(g Gomega, err error, fieldPath, secret string) {
	g.ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.ExpectWithOffset(1, err.Error()).To(ContainSubstring(fieldPath))
	g.ExpectWithOffset(1, err.Error()).To(ContainSubstring("may not get secrets " + secret))
}

// updateAs reads obj as c, mutates it and updates it, again while the controllers' writes make it conflict.
func updateAs(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return c.Update(ctx, obj)
	})
}

func tokenSource(ns, name, url, secret string) *gnmicv1alpha1.TargetSource {
	return &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.TargetSourceSpec{Source: gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{
			URL: url, Auth: &gnmicv1alpha1.HTTPAuth{Token: &gnmicv1alpha1.TokenAuth{
				SecretRef: gnmicv1alpha1.SecretKeyRef{Name: secret, Key: "token"}}}}}}}
}

func TestGNMIcObjectsMayNameOnlySecretsTheRequesterMayRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	allowGNMIc(t, ns, "mallory")
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-db"},
		Data: map[string][]byte{"token": []byte("s3cret"), "username": []byte("admin"), "password": []byte("s3cret")}})).To(Succeed())
	// The administrator's profile carries the device password.
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "routers"},
		Spec: gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "prod-db"}}})).To(Succeed())
	mallory := as(t, "mallory")
	secret := ns + "/prod-db"

	// TargetSource: the inventory token would go to a URL of her choosing.
	expectRefused(g, mallory.Create(ctx, tokenSource(ns, "exfil", "https://mallory.example.com/", "prod-db")),
		"spec.source.http.auth.token.secretRef.name", secret)
	// A Secret inventory copies Secret values into Target names and labels.
	secretSource := &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-secret"},
		Spec: gnmicv1alpha1.TargetSourceSpec{Source: gnmicv1alpha1.InventorySource{Type: "Secret",
			Secret: &gnmicv1alpha1.ObjectSource{Name: "prod-db"}}}}
	expectRefused(g, mallory.Create(ctx, secretSource), "spec.source.secret.name", secret)
	// A static source whose devices would get the administrator's profile.
	static := staticSource(ns, "static", dev("r1", "mallory.example.com:57400"))
	static.Spec.Target.Profile = "routers"
	expectRefused(g, mallory.Create(ctx, static), "spec.target.profile", secret)
	// Update is checked like create: an administrator's harmless source repointed at the Secret.
	plain := staticSource(ns, "plain", dev("r1", "10.0.0.1:57400"))
	g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
	expectRefused(g, updateAs(ctx, mallory, plain, func() { plain.Spec.Target.Profile = "routers" }), "spec.target.profile", secret)

	// TargetProfile: the credentials go to every Target using it.
	own := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"},
		Spec: gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "prod-db"}}}
	expectRefused(g, mallory.Create(ctx, own), "spec.credentialsRef.name", secret)
	withCert := &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert"},
		Spec: gnmicv1alpha1.TargetProfileSpec{TLS: &gnmicv1alpha1.ClientTLS{ClientCertRef: &gnmicv1alpha1.SecretReference{Name: "prod-db"}}}}
	expectRefused(g, mallory.Create(ctx, withCert), "spec.tls.clientCertRef.name", secret)

	// Target: an address of her choosing with the administrator's profile receives the device password.
	expectRefused(g, mallory.Create(ctx, target(ns, "exfil", "mallory.example.com:57400", "routers")), "spec.profile", secret)
	router := target(ns, "core1", "10.0.0.1:57400", "routers")
	g.Expect(env.Client.Create(ctx, router)).To(Succeed())
	g.Expect(updateAs(ctx, mallory, router, func() { router.Labels = map[string]string{"site": "a"} })).
		To(Succeed(), "a change that moves no credentials is not checked")
	expectRefused(g, updateAs(ctx, mallory, router, func() { router.Spec.Address = "mallory.example.com:57400" }), "spec.profile", secret)

	// Cluster: env secretKeyRef mounts the Secret into collector pods.
	cl := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}, Spec: gnmicv1alpha1.ClusterSpec{
		Image: "ghcr.io/openconfig/gnmic:0.45.0", Env: []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "prod-db"}, Key: "password"}}}}}}
	expectRefused(g, mallory.Create(ctx, cl), "spec.env[0].valueFrom.secretKeyRef.name", secret)

	// Objects that name no Secret she cannot read are not affected.
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "open"}})).To(Succeed())
	g.Expect(mallory.Create(ctx, target(ns, "lab", "lab.example.com:57400", "open"))).To(Succeed())
	labSource := staticSource(ns, "lab", dev("r1", "lab.example.com:57400"))
	labSource.Spec.Target.Profile = "open"
	g.Expect(mallory.Create(ctx, labSource)).To(Succeed())

	// Granted get on that one Secret, she may.
	grantSecret(t, ns, "mallory", "prod-db")
	g.Eventually(func() error { return mallory.Create(ctx, own) }).Should(Succeed())
	g.Expect(mallory.Create(ctx, target(ns, "exfil", "mallory.example.com:57400", "routers"))).To(Succeed())
	g.Expect(mallory.Create(ctx, static)).To(Succeed())
}

func TestGNMIcInventoryThatMayNameAnyProfileNeedsListOnSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	allowGNMIc(t, ns, "mallory")
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inventory"},
		Data: map[string]string{"devices": "[]"}})).To(Succeed())
	grantConfigMap := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-inventory"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	g.Expect(env.Client.Create(ctx, grantConfigMap)).To(Succeed())
	bind(t, ns, "mallory-reads-inventory", "Role", "read-inventory", "mallory")
	src := &gnmicv1alpha1.TargetSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"},
		Spec: gnmicv1alpha1.TargetSourceSpec{Source: gnmicv1alpha1.InventorySource{Type: "ConfigMap",
			ConfigMap: &gnmicv1alpha1.ObjectSource{Name: "inventory"}}}}

	// The document may give each device any profile of the namespace, and so any credentials in it.
	err := as(t, "mallory").Create(ctx, src)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.source.type"))
	g.Expect(err.Error()).To(ContainSubstring(`may not list secrets in namespace "` + ns + `"`))

	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "list-secrets"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}}})).To(Succeed())
	bind(t, ns, "mallory-lists-secrets", "Role", "list-secrets", "mallory")
	g.Eventually(func() error { return as(t, "mallory").Create(ctx, src) }).Should(Succeed())
}
