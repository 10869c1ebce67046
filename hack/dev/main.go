// Command dev is `make dev`: it starts the cluster-grade local control plane on loopback (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok's simulated nodes) with every CRD and webhook configuration, runs
// the operator's manager against it with the webhooks served locally, applies config/samples, waits until they
// converge, and prints how to reach it. Ctrl-C tears everything down.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
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

	var collectors *devstack.Collectors
	if os.Getenv("QUARTET_DEV_GNMIC_COLLECTOR") != "false" {
		if collectors, err = devstack.StartCollectors(3); err != nil {
			return err
		}
		defer collectors.Close()
	}

	root := testenv.RepoRoot()
	fleet, err := devstack.StartFleet(filepath.Join(root, ".dev"), envOr("FLEET_DEV_ADDR", "127.0.0.1:8444"),
		envOr("FLEET_DEV_SOURCE_ADDR", "127.0.0.1:8445"))
	if err != nil {
		return err
	}
	defer fleet.Close()

	fmt.Println("make dev: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback …")
	reg := newDevRegistry()
	dial, err := devDialMap(collectors)
	if err != nil {
		return err
	}
	env, err := testenv.Start(testenv.Options{Controllers: testenv.AllControllers(), Logger: &logger,
		Cluster: &testenv.ClusterOptions{},
		Manager: func(o *manager.Options) {
			fleet.ManagerOptions(o)
			reg.managerOptions(o)
			o.DevDialMap = dial
		}})
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
	if err := devstack.ApplyInventory(ctx, env.Client, "make-dev"); err != nil {
		return err
	}
	if err := fleet.CreateSecret(ctx, env.Client); err != nil {
		return err
	}
	if err := reg.createSecret(ctx, env.Client); err != nil {
		return err
	}
	applied, err := testenv.ApplySamples(ctx, env.Client, filepath.Join(root, "config", "samples"), "default", "make-dev")
	if err != nil {
		return err
	}
	if err := fleet.ApplyDevSync(ctx, env.Client); err != nil {
		return err
	}
	gitopsInfo, stopGitops, err := startGitops(ctx, env, filepath.Join(root, ".dev", "gitops"))
	if err != nil {
		return err
	}
	defer stopGitops()
	reached := func(what string, after time.Duration) {
		fmt.Printf("make dev: %s (%s)\n", what, after.Round(100*time.Millisecond))
	}
	if missing := devstack.WaitConverged(ctx, env.Client, 3*time.Minute, reached); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "make dev: not converged after 3m: %v (see the objects' conditions; cluster logs in %s)\n",
			missing, env.Cluster.LogDir())
	}
	fmt.Print(gitopsInfo)
	fmt.Print(collectorsHelp(collectors))
	fmt.Printf(`
make dev: the operator is running with every controller and webhook (%d samples applied).

  export KUBECONFIG=%s
  bin/k8s/kubectl get targets,targetprofiles,targetsources -A
  bin/k8s/kubectl get tenantquotas,agentdeployments,deployments,services,hpa,podmonitors
  bin/k8s/kubectl get tenants,platforms -A   # gitops: the team-demo Tenant and the Platform's stages
  bin/k8s/kubectl get nodes,pods -A          # simulated nodes (kwok) and the pods the real controllers made

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
`, applied, kubeconfig, fleetHelp(fleet), reg.help())
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

func envOr(key, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return fallback
}
