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

// TestBaseOnlyChangeDeploysEveryOverlay: a push that changes only a kustomize base (outside both overlays' paths)
// matches every overlay whose render read it, and each deploys the change; an overlay on another base does not.
func TestBaseOnlyChangeDeploysEveryOverlay(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	r.commit(map[string]*string{
		"base/kustomization.yaml":         s(baseKustomization),
		"base/cm.yaml":                    configMapYAML("cfg", "", "1"),
		"other/kustomization.yaml":        s(baseKustomization),
		"other/cm.yaml":                   configMapYAML("other", "", "1"),
		"envs/prod/kustomization.yaml":    s(prodOverlay),
		"envs/staging/kustomization.yaml": s("resources: [../../base]\nnamePrefix: staging-\n"),
		"envs/lab/kustomization.yaml":     s("resources: [../../other]\nnamePrefix: lab-\n"),
	})
	sourceTarget(ctx, ns, "prod", r, "envs/prod", "")
	sourceTarget(ctx, ns, "staging", r, "envs/staging", "")
	sourceTarget(ctx, ns, "lab", r, "envs/lab", "")
	deployOK(t, ns, r, map[string]*string{"envs/prod/x.txt": s("1"), "envs/staging/x.txt": s("1"),
		"envs/lab/x.txt": s("1")})
	Expect(mustCM(ctx, ns, "prod-cfg").Data).To(HaveKeyWithValue("value", "1"))
	labRV := mustCM(ctx, ns, "lab-other").ResourceVersion

	sha := deployOK(t, ns, r, map[string]*string{"base/cm.yaml": configMapYAML("cfg", "", "2")})
	for _, name := range []string{"prod-cfg", "staging-cfg"} {
		cm := mustCM(ctx, ns, name)
		Expect(cm.Data).To(HaveKeyWithValue("value", "2"), name)
		Expect(cm.Annotations).To(HaveKeyWithValue("katastroma.org/commit", sha), name)
	}
	Expect(mustCM(ctx, ns, "lab-other").ResourceVersion).To(Equal(labRV))
	Expect(mustCM(ctx, ns, "prod").Annotations).To(HaveKeyWithValue("katastroma.org/render-inputs", `["base"]`))
}
