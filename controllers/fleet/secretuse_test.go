package fleet_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestASyncMayNameOnlyASecretTheRequesterMayRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	allowFleet(t, ns, "mallory")
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cmdb-token"},
		Data: map[string][]byte{"bearer-token": []byte("s3cret")}})).To(Succeed())
	sync := func(name string) *fleetv1alpha1.ExternalAttributeSync {
		s := httpSync(ns, name, "https://cmdb.example.com/collectors", fleetv1alpha1.PolicySelector{CollectorIDs: []string{"a"}}, map[string]string{"rack": "rack"})
		s.Spec.Source.SecretRef = &fleetv1alpha1.SecretReference{Name: "cmdb-token"}
		return s
	}

	// Mallory may write syncs but not read the Secret: naming it would send it to a host of her choosing.
	err := as(t, "mallory").Create(ctx, sync("exfil"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.source.secretRef"))
	g.Expect(err.Error()).To(ContainSubstring(`may not get secrets ` + ns + `/cmdb-token`))
	// A sync without a Secret is not affected.
	plain := httpSync(ns, "plain", "https://cmdb.example.com/collectors", fleetv1alpha1.PolicySelector{CollectorIDs: []string{"a"}}, map[string]string{"rack": "rack"})
	g.Expect(as(t, "mallory").Create(ctx, plain)).To(Succeed())

	// Granted get on that one Secret, she may.
	g.Expect(env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-cmdb-token"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"cmdb-token"}, Verbs: []string{"get"}}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory-reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-cmdb-token"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}})).To(Succeed())
	g.Eventually(func() error { return as(t, "mallory").Create(ctx, sync("allowed")) }).Should(Succeed())
}
