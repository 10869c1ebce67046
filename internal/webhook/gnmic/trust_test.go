package gnmic

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// uses shows requester.Uses in a comparable, readable form: "verb resource ns/name at field".
func uses(us []requester.Use) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Verb+" "+u.Resource+" "+u.Namespace+"/"+u.Name+" at "+u.Field.String())
	}
	return out
}

func TestTrustUses(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(gnmicv1alpha1.AddToScheme(scheme)).To(Succeed())
	profiles := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "creds"},
			Spec: gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "device-pw"}}},
		&gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "open"}},
	).Build()
	trust := &Trust{Enforce: true, Profiles: profiles}
	ctx := context.Background()
	meta := metav1.ObjectMeta{Namespace: "a", Name: "x"}
	ref := gnmicv1alpha1.SecretKeyRef{Name: "tok", Key: "k"}

	for name, tc := range map[string]struct {
		got  func() ([]requester.Use, error)
		want []string
	}{
		"http source with token, CA, client cert and webhook auth": {func() ([]requester.Use, error) {
			return trust.targetSourceUses(ctx, &gnmicv1alpha1.TargetSource{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetSourceSpec{
				Source: gnmicv1alpha1.InventorySource{Type: "HTTP", HTTP: &gnmicv1alpha1.HTTPSource{URL: "https://i.example.com",
					Auth: &gnmicv1alpha1.HTTPAuth{Token: &gnmicv1alpha1.TokenAuth{SecretRef: ref}},
					TLS: &gnmicv1alpha1.HTTPTLS{CABundleRef: &gnmicv1alpha1.ConfigMapKeyRef{Name: "ca", Key: "ca.crt"},
						ClientCertRef: &gnmicv1alpha1.LocalObjectRef{Name: "cert"}}}},
				Webhook: &gnmicv1alpha1.RefreshWebhook{Auth: &gnmicv1alpha1.RefreshAuth{Signature: &gnmicv1alpha1.SignatureAuth{SecretRef: ref}}},
				Target:  gnmicv1alpha1.TargetTemplate{Profile: "creds"}}})
		}, []string{
			"get secrets a/tok at spec.source.http.auth.token.secretRef.name",
			"get configmaps a/ca at spec.source.http.tls.caBundleRef.name",
			"get secrets a/cert at spec.source.http.tls.clientCertRef.name",
			"get secrets a/tok at spec.webhook.auth.signature.secretRef.name",
			"list secrets a/ at spec.source.type",
			"get secrets a/device-pw at spec.target.profile",
		}},
		"static source: only the profiles' credentials": {func() ([]requester.Use, error) {
			return trust.targetSourceUses(ctx, &gnmicv1alpha1.TargetSource{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetSourceSpec{
				Source: gnmicv1alpha1.InventorySource{Type: "Static", Static: &gnmicv1alpha1.StaticSource{Devices: []gnmicv1alpha1.StaticDevice{
					{Name: "r1", Address: "r1:1", Profile: "open"}, {Name: "r2", Address: "r2:1", Profile: "creds"}, {Name: "r3", Address: "r3:1", Profile: "missing"}}}},
				Target: gnmicv1alpha1.TargetTemplate{Profile: "open"}}})
		}, []string{"get secrets a/device-pw at spec.source.static.devices[1].profile"}},
		"profile: credentials, client certificate, CA bundle": {func() ([]requester.Use, error) {
			return targetProfileUses(&gnmicv1alpha1.TargetProfile{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetProfileSpec{
				CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "pw"},
				TLS: &gnmicv1alpha1.ClientTLS{ClientCertRef: &gnmicv1alpha1.SecretReference{Name: "cert"},
					CABundle: &gnmicv1alpha1.CABundleSource{ConfigMapRef: &gnmicv1alpha1.KeyReference{Name: "ca"}}}}}), nil
		}, []string{"get secrets a/pw at spec.credentialsRef.name", "get secrets a/cert at spec.tls.clientCertRef.name",
			"get configmaps a/ca at spec.tls.caBundle.configMapRef.name"}},
		"cluster env": {func() ([]requester.Use, error) {
			return clusterUses(&gnmicv1alpha1.Cluster{ObjectMeta: meta, Spec: gnmicv1alpha1.ClusterSpec{
				GRPCTunnel: &gnmicv1alpha1.GRPCTunnel{Port: 1, TLS: &gnmicv1alpha1.ClusterTLS{}, ClientCARef: &gnmicv1alpha1.KeyReference{Name: "dev-ca"}},
				Env: []corev1.EnvVar{
					{Name: "PLAIN", Value: "x"},
					{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
					{Name: "CFG", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Key: "k"}}},
				}}}), nil
		}, []string{"get secrets a/dev-ca at spec.grpcTunnel.clientCARef.name",
			"get secrets a/s at spec.env[1].valueFrom.secretKeyRef.name", "get configmaps a/c at spec.env[2].valueFrom.configMapKeyRef.name"}},
		"new target with a credentialed profile": {func() ([]requester.Use, error) {
			return trust.targetUses(ctx, nil, &gnmicv1alpha1.Target{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetSpec{Address: "evil:1", Profile: "creds"}})
		}, []string{"get secrets a/device-pw at spec.profile"}},
		"target update that moves nothing": {func() ([]requester.Use, error) {
			tg := &gnmicv1alpha1.Target{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetSpec{Address: "r1:1", Profile: "creds"}}
			return trust.targetUses(ctx, tg.DeepCopy(), tg)
		}, nil},
		"target moved to another address": {func() ([]requester.Use, error) {
			old := &gnmicv1alpha1.Target{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetSpec{Address: "r1:1", Profile: "creds"}}
			tg := old.DeepCopy()
			tg.Spec.Address = "evil:1"
			return trust.targetUses(ctx, old, tg)
		}, []string{"get secrets a/device-pw at spec.profile"}},
		"target with a profile without credentials": {func() ([]requester.Use, error) {
			return trust.targetUses(ctx, nil, &gnmicv1alpha1.Target{ObjectMeta: meta, Spec: gnmicv1alpha1.TargetSpec{Address: "evil:1", Profile: "open"}})
		}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := tc.got()
			g.Expect(err).NotTo(HaveOccurred())
			if tc.want == nil {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(uses(got)).To(ConsistOf(tc.want))
		})
	}
}
