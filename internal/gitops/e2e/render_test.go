package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// renderWarnings is the source target annotation naming what the last render skipped.
const renderWarnings = "katastroma.org/last-render-warnings"

const baseKustomization = `resources: [cm.yaml]
`

const prodOverlay = `resources: [../../base]
namePrefix: prod-
`

const hookJob = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations: {"helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "-1"}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: busybox}]
`

// TestOverlayWithBaseAndChartWithHook: a kustomize overlay whose base lies outside the target path builds (the
// source handler ships the enclosing subtree), and a chart with a hook deploys without the hook, which is named in
// a span event of the renderer and on the source target.
func TestOverlayWithBaseAndChartWithHook(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	sha, changed := r.commit(map[string]*string{
		"base/kustomization.yaml":       s(baseKustomization),
		"base/cm.yaml":                  configMapYAML("cfg", "", "base"),
		"envs/prod/kustomization.yaml":  s(prodOverlay),
		"unrelated/big.yaml":            configMapYAML("unrelated", "", "x"),
		"chart/Chart.yaml":              s(chart),
		"chart/values.yaml":             s("color: red\n"),
		"chart/templates/cm.yaml":       s(chartCM),
		"chart/templates/hook-job.yaml": s(hookJob),
	})
	sourceTarget(ctx, ns, "prod", r, "envs/prod", "")
	sourceTarget(ctx, ns, "web", r, "chart", "")

	eventID := accepted(t, ns, r.pushPayload(sha, changed))
	root := waitEvent(t, eventID)
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "prod-cfg").Data).To(HaveKeyWithValue("value", "base"))
	_, err := getCM(ctx, ns, "unrelated")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "only the overlay's objects are rendered")
	Expect(mustCM(ctx, ns, "web-cfg").Data).To(HaveKeyWithValue("color", "red"))
	err = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-migrate"}, &batchv1.Job{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the hook is not applied")

	var skipped []string
	for _, sp := range named(traceSpans(eventID), "renderer") {
		for _, ev := range sp.Events {
			if ev.Name != "helm.hook.skipped" {
				continue
			}
			a := attribute.NewSet(ev.Attributes...)
			kind, _ := a.Value("object.kind")
			name, _ := a.Value("object.name")
			hooks, _ := a.Value("helm.hook")
			skipped = append(skipped, kind.AsString()+"/"+name.AsString()+" "+hooks.AsString())
		}
	}
	Expect(skipped).To(ConsistOf("Job/web-migrate pre-install,pre-upgrade"))
	Expect(mustCM(ctx, ns, "web").Annotations).To(HaveKeyWithValue(renderWarnings,
		And(ContainSubstring(sha), ContainSubstring("skipped Helm hook Job/web-migrate (pre-install,pre-upgrade)"))))
	Expect(mustCM(ctx, ns, "prod").Annotations).NotTo(HaveKey(renderWarnings))
}
