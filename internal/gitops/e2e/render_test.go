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
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
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
	web := mustCM(ctx, ns, "web")
	web.Data["helm-hooks"] = "skip"
	Expect(env.Client.Update(ctx, web)).To(Succeed())

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

// TestHelmChartsAsHelmInstalls: a subchart its condition disables is not deployed, values a subchart exports are
// imported, and a chart with install hooks is refused by default with the hooks named on the source target.
func TestHelmChartsAsHelmInstalls(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	subCM := func(name string) *string {
		return s("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + name + "\n")
	}
	sha, changed := r.commit(map[string]*string{
		"app/Chart.yaml": s(`apiVersion: v2
name: app
version: 0.1.0
dependencies:
- {name: postgresql, version: "1.x", condition: postgresql.enabled}
- {name: lib, version: "1.x", import-values: [defaults]}
`),
		"app/values.yaml": s("postgresql:\n  enabled: false\n"),
		"app/templates/cm.yaml": s("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\n" +
			"data:\n  color: {{ .Values.color | default \"none\" | quote }}\n"),
		"app/charts/postgresql/Chart.yaml":        s("apiVersion: v2\nname: postgresql\nversion: 1.0.0\n"),
		"app/charts/postgresql/templates/cm.yaml": subCM("postgresql"),
		"app/charts/lib/Chart.yaml":               s("apiVersion: v2\nname: lib\nversion: 1.0.0\n"),
		"app/charts/lib/values.yaml":              s("exports:\n  defaults:\n    color: blue\n"),
		"app/charts/lib/templates/cm.yaml":        subCM("lib"),
		"hooked/Chart.yaml":                       s(chart),
		"hooked/templates/cm.yaml":                s(chartCM),
		"hooked/templates/hook-job.yaml":          s(hookJob),
	})
	sourceTarget(ctx, ns, "web", r, "app", "")
	sourceTarget(ctx, ns, "hooked", r, "hooked", "")
	root := waitEvent(t, accepted(t, ns, r.pushPayload(sha, changed)))

	Expect(mustCM(ctx, ns, "web-cfg").Data).To(HaveKeyWithValue("color", "blue"), "import-values was lost")
	Expect(mustCM(ctx, ns, "web-lib")).NotTo(BeNil())
	_, err := getCM(ctx, ns, "web-postgresql")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the disabled subchart was deployed: %v", err)
	Expect(mustCM(ctx, ns, "web").Annotations).To(HaveKeyWithValue("katastroma.org/last-result", "succeeded"))

	Expect(root.Status.Code).To(Equal(codes.Error), "the chart with install hooks was not refused")
	hooked := mustCM(ctx, ns, "hooked").Annotations
	Expect(hooked).To(HaveKeyWithValue("katastroma.org/last-result", "failed"))
	Expect(hooked).To(HaveKeyWithValue("katastroma.org/last-error", And(
		ContainSubstring("Job/hooked-migrate (pre-install,pre-upgrade)"), ContainSubstring(`data.helm-hooks to "skip"`))))
	_, err = getCM(ctx, ns, "hooked-cfg")
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused chart deployed: %v", err)
}

// gitFetches reads katastroma_source_git_fetches_total from the registry the stages serve.
func gitFetches() float64 {
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == "katastroma_source_git_fetches_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// TestTargetsOfOnePushShareOneFetch: three targets of one repository matched by one push fetch its commit once,
// not once each (a monorepo push would otherwise hold N copies of the commit in memory at once).
func TestTargetsOfOnePushShareOneFetch(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := newTenant(ctx)
	r := gitd.newRepo(t)
	for _, name := range []string{"one", "two", "three"} {
		sourceTarget(ctx, ns, name, r, name, "")
	}
	deployOK(t, ns, r, map[string]*string{"one/a.yaml": configMapYAML("a1", "", "1"),
		"two/a.yaml": configMapYAML("a2", "", "1"), "three/a.yaml": configMapYAML("a3", "", "1")})
	Expect(mustCM(ctx, ns, "a3").Data).To(HaveKeyWithValue("value", "1"))
	// Two upload-packs: the webhook's head check lists the ref once for the three targets, and one fetch.
	Expect(gitd.uploadPacks(r)).To(Equal(2), "the targets of one push fetched the commit separately:\n%s", gitd.log)
	// The counter is process-wide (other tests' targets keep polling), so only that it is served is checked.
	Expect(gitFetches()).To(BeNumerically(">=", 1))
}
