package provisioner

import (
	"testing"

	. "github.com/onsi/gomega"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

func TestContains(t *testing.T) {
	live := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: a
  resourceVersion: "7"
  labels: {app: web, extra: x}
  annotations: {katastroma.org/manifest-hash: h1, katastroma.org/commit: c1, deployment.kubernetes.io/revision: "2"}
spec:
  replicas: 2
  progressDeadlineSeconds: 600
  template:
    spec:
      containers: [{name: web, image: "nginx:1", imagePullPolicy: Always}]
status: {replicas: 2}
`
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"subset with defaults and metadata live only", `{"apiVersion":"apps/v1","kind":"Deployment",` +
			`"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":2,"template":{"spec":` +
			`{"containers":[{"name":"web","image":"nginx:1"}]}}}}`, true},
		{"a changed scalar is drift", `{"spec":{"replicas":3}}`, false},
		{"a changed list element is drift", `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}`, false},
		{"a removed list element is drift", `{"spec":{"template":{"spec":{"containers":[]}}}}`, false},
		{"a changed label is drift", `{"metadata":{"labels":{"app":"db"}}}`, false},
		{"a missing field is drift", `{"spec":{"paused":true}}`, false},
		{"status is not ours", `{"status":{"replicas":9}}`, true},
		{"a new commit of the same manifest is no drift", `{"metadata":{"annotations":{"katastroma.org/commit":"c2",` +
			`"katastroma.org/manifest-hash":"h1"}}}`, true},
		{"a changed annotation is drift", `{"metadata":{"annotations":{"katastroma.org/manifest-hash":"h2"}}}`, false},
		{"numbers compare by value", `{"spec":{"progressDeadlineSeconds":600.0}}`, true},
	} {
		g := NewWithT(t)
		have, err := pipeline.SplitYAML([]byte(live))
		g.Expect(err).NotTo(HaveOccurred())
		w := mustJSON(g, tc.want)
		g.Expect(Contains(have[0].Object, w)).To(Equal(tc.ok), tc.name)
	}
}

func mustJSON(g Gomega, s string) map[string]any {
	var m map[string]any
	g.Expect(yamlUnmarshal([]byte(s), &m)).To(Succeed())
	return m
}

func yamlUnmarshal(b []byte, v any) error { return sigsyaml.Unmarshal(b, v) }
