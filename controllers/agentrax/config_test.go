package agentrax_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

func decodeAll(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// The kustomize components (NetworkPolicy, adapter rules, dashboard; the PrometheusRule moved to config/prometheus) are accepted by a real API
// server with the prometheus-operator CRDs installed, and the dashboard is valid JSON with the five panels.
func TestConfigComponentsAreValidObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "components", "agentrax-*", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	created := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, u := range decodeAll(t, f) {
			u.SetNamespace(ns)
			g.Expect(env.Client.Create(ctx, u, client.DryRunAll)).To(Succeed(), "%s %s", f, u.GetKind())
			created++
			if u.GetName() == "agentrax-grafana-dashboard" {
				var dash struct {
					Panels []struct {
						Title string `json:"title"`
					} `json:"panels"`
				}
				raw, _, _ := unstructured.NestedString(u.Object, "data", "agentrax.json")
				g.Expect(json.Unmarshal([]byte(raw), &dash)).To(Succeed())
				g.Expect(dash.Panels).To(HaveLen(5))
			}
		}
	}
	g.Expect(created).To(Equal(3))
}

// The samples `make dev` applies: the quota is admitted, the agent fits it and gets its children.
func TestSamplesFitAndGetChildren(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for _, f := range []string{"agentrax_v1alpha1_tenantquota.yaml", "agentrax_v1alpha1_agentdeployment.yaml"} {
		for _, u := range decodeAll(t, filepath.Join(testenv.RepoRoot(), "config", "samples", f)) {
			u.SetNamespace(ns)
			g.Expect(env.Client.Create(ctx, u)).To(Succeed(), f)
		}
	}
	key := client.ObjectKey{Namespace: ns, Name: "my-agent"}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, &appsv1.Deployment{})).To(Succeed())
		g.Expect(env.Client.Get(ctx, key, &corev1.Service{})).To(Succeed())
		g.Expect(env.Client.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{})).To(Succeed())
		tq := getQuota(g, ns, "alpha-quota")
		g.Expect(tq.Status.UsedGPUs).To(Equal(int64(4)))
		ad := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, key, ad)).To(Succeed())
		g.Expect(ad.Status.Phase).NotTo(BeEmpty())
		expectPhaseMetric(g, ns, "my-agent", string(ad.Status.Phase))
	}).Should(Succeed())
}
