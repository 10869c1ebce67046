// Command dev is `make dev`: it starts an embedded kube-apiserver and etcd on loopback with every CRD and webhook
// configuration, runs the operator's manager against it with the webhooks served locally, applies
// config/samples, and prints how to reach it. Ctrl-C tears everything down.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "make dev:", err)
		os.Exit(1)
	}
}

func run() error {
	logger, err := telemetry.NewLogger(envOr("LOG_LEVEL", "info"), false)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	collector, err := startDevCollector()
	if err != nil {
		return err
	}
	defer collector.close()

	root := testenv.RepoRoot()
	fleet, err := startDevFleet(root)
	if err != nil {
		return err
	}
	defer fleet.close()

	fmt.Println("make dev: starting kube-apiserver and etcd on loopback …")
	reg := newDevRegistry()
	env, err := testenv.Start(testenv.Options{Controllers: testenv.AllControllers(), Logger: &logger,
		Manager: func(o *manager.Options) { fleet.managerOptions(o); reg.managerOptions(o) }})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("make dev: stopping the manager and the control plane …")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "make dev: stopping:", err)
		}
	}()

	kubeconfig := filepath.Join(root, ".dev", "kubeconfig")
	if err := writeKubeconfig(env, kubeconfig); err != nil {
		return err
	}
	if err := applyDevInventory(ctx, env.Client); err != nil {
		return err
	}
	if err := fleet.createSecret(ctx, env.Client); err != nil {
		return err
	}
	if err := reg.createSecret(ctx, env.Client); err != nil {
		return err
	}
	applied, err := applySamples(ctx, env.Client, filepath.Join(root, "config", "samples"))
	if err != nil {
		return err
	}
	if err := fleet.applyDevSync(ctx, env.Client); err != nil {
		return err
	}
	if err := collector.attach(ctx, env.Client); err != nil {
		return err
	}
	gitopsInfo, stopGitops, err := startGitops(ctx, env, filepath.Join(root, ".dev", "gitops"))
	if err != nil {
		return err
	}
	defer stopGitops()
	fmt.Print(gitopsInfo)
	fmt.Printf(`
make dev: the operator is running with every controller and webhook (%d samples applied).

  export KUBECONFIG=%s
  bin/k8s/kubectl get targets,targetprofiles,targetsources -A
  bin/k8s/kubectl get tenantquotas,agentdeployments,deployments,services,hpa,podmonitors
  bin/k8s/kubectl get tenants,platforms -A   # gitops: the team-demo Tenant and the Platform's stages

Try a bad object (the webhook rejects it and names the field):

  bin/k8s/kubectl apply -f - <<'EOF'
  apiVersion: operator.gnmic.dev/v1alpha1
  kind: Target
  metadata: {name: bad}
  spec: {address: router1, profile: default}
  EOF

%s
%s
Ctrl-C stops everything.
`, applied, kubeconfig, fleet.help(), reg.help())
	<-ctx.Done()
	return nil
}

func writeKubeconfig(env *testenv.Env, path string) error {
	data, err := env.AddAdminKubeconfig("dev-admin")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// applySamples server-side applies every object of the sample files (namespaced ones into the default namespace), in the order
// config/samples/kustomization.yaml lists them (profiles before the Targets that use them).
func applySamples(ctx context.Context, c client.Client, dir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return 0, err
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		return 0, fmt.Errorf("reading %s/kustomization.yaml: %w", dir, err)
	}
	applied := 0
	for _, name := range kustomization.Resources {
		file := filepath.Join(dir, name)
		objs, err := readObjects(file)
		if err != nil {
			return applied, err
		}
		for _, u := range objs {
			if u.GetNamespace() == "" {
				// Cluster-scoped samples (Tenant) stay without a namespace.
				namespaced, err := c.IsObjectNamespaced(u)
				if err != nil {
					return applied, fmt.Errorf("%s %s from %s: %w", u.GetKind(), u.GetName(), file, err)
				}
				if namespaced {
					u.SetNamespace("default")
				}
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
				client.FieldOwner("make-dev"), client.ForceOwnership); err != nil {
				return applied, fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), file, err)
			}
			ctrl.Log.Info("applied sample", "kind", u.GetKind(), "name", u.GetName())
			applied++
		}
	}
	return applied, nil
}

func readObjects(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func envOr(key, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return fallback
}
