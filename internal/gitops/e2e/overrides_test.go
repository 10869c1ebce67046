package e2e

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
)

// TestHelmOverridesLiveInASecret: Helm values may hold credentials, so they are kept in a Secret and not in the
// source target ConfigMap, which the namespace's readers and the provisioner's and pruner's identities read.
// The registration API writes them there, values an earlier version left in the ConfigMap are moved there, and
// the chart is rendered with them either way.
func TestHelmOverridesLiveInASecret(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	holdTenant(ctx, ns)
	token := saToken(ctx, ns, source.DefaultRegistrationAudience)
	r := gitd.newRepo(t)
	sha, changed := r.commit(map[string]*string{"chart/Chart.yaml": s(chart), "chart/values.yaml": s("color: red\n"),
		"chart/templates/cm.yaml": s(chartCM)})
	const secretValue = "color: green-s3cret\n"

	code, body := call(http.MethodPut, "/api/v1/namespaces/"+ns+"/sourcetargets/web", token,
		source.Registration{RepoURL: r.url, Ref: r.branch, Path: "chart", Overrides: secretValue})
	Expect(code).To(Equal(http.StatusCreated), "%v", body)
	noValuesIn(mustCM(ctx, ns, "web"), "green-s3cret")
	secret := &corev1.Secret{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web" + source.OverridesSecretSuffix}, secret)).To(Succeed())
	Expect(secret.Data).To(HaveKeyWithValue(source.OverridesKey, []byte(secretValue)))
	resp, err := sourceClient().Retrieve(ctx, &katastromav1.RetrieveRequest{Namespace: ns, SourceTarget: "web"})
	Expect(err).NotTo(HaveOccurred())
	root := waitEvent(t, resp.GetEventId())
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "web-cfg").Data).To(HaveKeyWithValue("color", "green-s3cret"))

	// What an earlier version stored: the values in the ConfigMap. They move into the Secret.
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old",
		Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
		Data: map[string]string{"repo-url": r.url, "ref": r.branch, "path": "chart", "overrides": "color: blue-s3cret\n"}}
	Expect(env.Client.Create(ctx, legacy)).To(Succeed())
	Eventually(func(g Gomega) {
		cm, err := getCM(ctx, ns, "old")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cm.Annotations).To(HaveKeyWithValue(source.AnnotationOverridesSecret, "old"+source.OverridesSecretSuffix))
		noValuesIn(cm, "blue-s3cret")
	}).Should(Succeed())
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old" + source.OverridesSecretSuffix}, secret)).To(Succeed())
	Expect(secret.Data).To(HaveKeyWithValue(source.OverridesKey, []byte("color: blue-s3cret\n")))
	eventID := accepted(t, ns, r.pushPayload(sha, changed))
	root = waitEvent(t, eventID)
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "old-cfg").Data).To(HaveKeyWithValue("color", "blue-s3cret"))

	// Deleting the target through the API deletes its overrides Secret too.
	code, body = call(http.MethodDelete, "/api/v1/namespaces/"+ns+"/sourcetargets/web", token, nil)
	Expect(code).To(Equal(http.StatusNoContent), "%v", body)
	Eventually(func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web" + source.OverridesSecretSuffix}, &corev1.Secret{})
	}).Should(MatchError(ContainSubstring("not found")))
}

// noValuesIn fails when a source target ConfigMap holds value in its data or annotations.
func noValuesIn(cm *corev1.ConfigMap, value string) {
	for k, v := range cm.Data {
		ExpectWithOffset(1, v).NotTo(ContainSubstring(value), "data.%s of source target %s", k, cm.Name)
	}
	for k, v := range cm.Annotations {
		ExpectWithOffset(1, v).NotTo(ContainSubstring(value), "annotation %s of source target %s", k, cm.Name)
	}
}
