package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// devStack is everything one `make dev` run started: the local peers (gNMIc collectors, Fleet API, attribute
// source, MCP registry), the control plane with the manager, the applied samples and the gitops pipeline.
type devStack struct {
	env        *testenv.Env
	collectors *devstack.Collectors
	fleet      *devstack.Fleet
	registry   *devRegistry
	realNode   *devstack.RealNode
	kubeconfig string
	// applied is the number of sample objects applied from config/samples.
	applied    int
	gitopsInfo string
	// stops undo what was started, run in reverse order by close.
	stops []func()
}

// startStack starts the whole development stack; on error it stops whatever it had started.
func startStack(ctx context.Context, cfg devConfig) (s *devStack, err error) {
	s = &devStack{registry: newDevRegistry(cfg.RegistryAddr)}
	defer func() {
		if err != nil {
			s.close()
			s = nil
		}
	}()
	if cfg.Collectors {
		if s.collectors, err = devstack.StartCollectors(3); err != nil {
			return s, err
		}
		s.stops = append(s.stops, s.collectors.Close)
	}
	if s.fleet, err = devstack.StartFleet(cfg.Dir, cfg.FleetAddr, cfg.FleetSourceAddr); err != nil {
		return s, err
	}
	s.stops = append(s.stops, s.fleet.Close)

	fmt.Fprintln(cfg.Out, "make dev: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback …")
	dial, err := devDialMap(s.collectors)
	if err != nil {
		return s, err
	}
	clusterOpts := &testenv.ClusterOptions{}
	if cfg.RealNode {
		// Fail before anything starts when the machine cannot run the node, naming every reason.
		if err := realnode.Preflight(); err != nil {
			return s, fmt.Errorf("%w (REAL_NODE=false runs without it)", err)
		}
		clusterOpts.AdvertiseAddress = realnode.GatewayIP // as realnode.ClusterOptions: pods reach the API server
	}
	if s.env, err = testenv.Start(testenv.Options{Controllers: testenv.AllControllers(), Logger: cfg.Logger,
		Cluster: clusterOpts,
		Manager: func(o *manager.Options) {
			s.fleet.ManagerOptions(o)
			s.registry.managerOptions(o)
			o.DevDialMap = dial
		}}); err != nil {
		return s, err
	}
	s.stops = append(s.stops, func() {
		fmt.Fprintln(cfg.Out, "make dev: stopping the manager and the control plane …")
		if err := s.env.Stop(); err != nil {
			fmt.Fprintln(cfg.Err, "make dev: stopping:", err)
		}
	})

	if cfg.RealNode {
		fmt.Fprintln(cfg.Out, "make dev: starting the real node (containerd, runc, kubelet, kube-proxy, kube-router) …")
		if s.realNode, err = devstack.StartRealNode(ctx, s.env); err != nil {
			return s, err
		}
		// Before the control plane stops: the node deletes its pods through it.
		s.stops = append(s.stops, func() {
			if err := s.realNode.Stop(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintln(cfg.Err, "make dev: stopping the real node:", err)
			}
		})
		fmt.Fprintf(cfg.Out, "make dev: real node %s Ready (%s)\n", s.realNode.Node.Name, s.realNode.Took.Round(100*time.Millisecond))
	}

	// The sample Cluster's API is mutual TLS: the stand-ins serve the certificate the operator issues.
	followCtx, stopFollowing := context.WithCancel(ctx)
	s.stops = append(s.stops, stopFollowing)
	s.collectors.Follow(followCtx, s.env.Client)

	s.kubeconfig = filepath.Join(cfg.Dir, "kubeconfig")
	if err := writeKubeconfig(s.env, s.kubeconfig); err != nil {
		return s, err
	}
	if err := devstack.ApplyInventory(ctx, s.env.Client, "make-dev"); err != nil {
		return s, err
	}
	if err := s.fleet.CreateSecret(ctx, s.env.Client); err != nil {
		return s, err
	}
	if err := s.registry.createSecret(ctx, s.env.Client); err != nil {
		return s, err
	}
	if s.applied, err = testenv.ApplySamples(ctx, s.env.Client, samplesDir(), "default", "make-dev"); err != nil {
		return s, err
	}
	if err := s.fleet.ApplyDevSync(ctx, s.env.Client); err != nil {
		return s, err
	}
	info, stopGitops, err := startGitops(ctx, s.env, filepath.Join(cfg.Dir, "gitops"))
	if err != nil {
		return s, err
	}
	s.gitopsInfo = info
	s.stops = append(s.stops, stopGitops)
	return s, nil
}

// close stops everything startStack started, the last started first.
func (s *devStack) close() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// samplesDir is config/samples, what `make dev` applies.
func samplesDir() string { return filepath.Join(testenv.RepoRoot(), "config", "samples") }

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
