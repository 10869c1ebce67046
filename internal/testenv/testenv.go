// Package testenv starts a real kube-apiserver and etcd with every CRD of this operator and the third-party CRDs
// it uses, installs the webhook configurations from config/webhook pointed at a real webhook server, and runs a
// manager with a chosen set of controllers. Each test package starts one from TestMain.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// Options selects what runs against the control plane.
type Options struct {
	// Controllers are the controller names to run (e.g. gnmic-target). Empty runs no manager at all.
	Controllers []string
	// Logger receives the control plane's and manager's logs. Unset discards them, unless QUARTET_TEST_LOGS is set.
	Logger *logr.Logger
	// Clock, when set, is given to the controllers that accept an injected clock.
	Clock clock.PassiveClock
	// Manager, when set, adjusts the manager's options (e.g. the Fleet API URL) before it is built.
	Manager func(*manager.Options)
	// Cluster, when set, runs Kubernetes' own controllers, a scheduler and simulated nodes beside the API server
	// (see ClusterOptions). Unset starts kube-apiserver and etcd alone.
	Cluster *ClusterOptions
	// WithoutOperator leaves the operator's own CRDs and webhook configurations out (third-party CRDs stay), for a
	// test where an installer such as OLM creates them. Controllers must then be empty.
	WithoutOperator bool
	// WithoutWebhooks keeps the operator's CRDs but leaves its webhook configurations out, for a plane where an
	// installer (OLM) creates them for a manager that runs as a pod. Controllers chosen besides run without
	// webhooks (EnableWebhooks false): objects are admitted as the CRDs alone admit them.
	WithoutWebhooks bool
	// ExtraCRDPaths are more CRD files or directories to install (e.g. OLM's).
	ExtraCRDPaths []string
	// WithoutMonitoringCRDs leaves the Prometheus Operator's CRDs out, as on a cluster without it.
	WithoutMonitoringCRDs bool
}

// Env is a running control plane, with a client and, when controllers were chosen, a manager.
type Env struct {
	// Config reaches the API server as its administrator.
	Config *rest.Config
	// Client is an uncached client for tests: what it reads is what the API server has.
	Client client.Client
	// Manager runs the chosen controllers and serves the webhooks; nil when no controller was chosen.
	Manager ctrl.Manager
	// Cluster is the cluster-grade part of the control plane; nil unless Options.Cluster was set.
	Cluster *Cluster

	env         *envtest.Environment
	cancel      context.CancelFunc
	done        chan error
	controllers []string
	adjust      func(*manager.Options)
	clock       clock.PassiveClock
	// withoutWebhooks: the manager serves no webhooks (Options.WithoutWebhooks).
	withoutWebhooks bool
}

// Start brings up kube-apiserver and etcd, installs CRDs and webhook configurations, and starts the manager.
func Start(opts Options) (*Env, error) {
	switch {
	case opts.Logger != nil:
		logf.SetLogger(*opts.Logger)
	case os.Getenv("QUARTET_TEST_LOGS") != "":
		logf.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	default:
		logf.SetLogger(logr.Discard())
	}
	assets, err := BinaryAssetsDir()
	if err != nil {
		return nil, err
	}
	thirdParty, err := ThirdPartyCRDPaths()
	if err != nil {
		return nil, err
	}
	if opts.WithoutMonitoringCRDs {
		thirdParty = slices.DeleteFunc(thirdParty, IsMonitoringCRD)
	}
	root := RepoRoot()
	crds := append(append([]string{filepath.Join(root, "config", "crd", "bases")}, thirdParty...), opts.ExtraCRDPaths...)
	webhooks := envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")}}
	if opts.WithoutWebhooks {
		webhooks = envtest.WebhookInstallOptions{}
	}
	if opts.WithoutOperator {
		if len(opts.Controllers) > 0 {
			return nil, errors.New("testenv: WithoutOperator runs no controllers")
		}
		crds = append(append([]string(nil), thirdParty...), opts.ExtraCRDPaths...)
		webhooks = envtest.WebhookInstallOptions{}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: webhooks,
		Scheme:                operator.NewScheme(),
		// A loaded two-core machine can take well over the 20s default to bring kube-apiserver up.
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// envtest's default Service range (10.0.0.0/24) holds 253 Services; the agentrax benchmark alone creates 500.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", ServiceCIDR)
	var cluster *Cluster
	if opts.Cluster != nil {
		if cluster, err = prepareCluster(env, *opts.Cluster); err != nil {
			return nil, err
		}
	}
	started := time.Now()
	cfg, err := env.Start()
	if err != nil {
		if cluster != nil {
			err = errors.Join(err, cluster.cleanup())
		}
		return nil, fmt.Errorf("starting the control plane from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, env: env, Cluster: cluster}
	if e.Client, err = client.New(cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return nil, errors.Join(err, e.stopControlPlane())
	}
	if cluster != nil {
		if err := cluster.start(env, e.Client); err != nil {
			return nil, errors.Join(err, e.stopControlPlane())
		}
		logf.Log.WithName("testenv").Info("cluster-grade control plane ready", "took", time.Since(started).String(),
			"logs", cluster.LogDir())
	}
	// The operator's shipped ClusterRoles, as an install creates them: Platforms bind them and Tenants check what
	// the aggregated tenant roles grant.
	if !opts.WithoutOperator {
		if err := ApplyShippedClusterRoles(context.Background(), e.Client); err != nil {
			return nil, errors.Join(err, e.stopControlPlane())
		}
	}
	if len(opts.Controllers) == 0 {
		return e, nil
	}
	e.controllers, e.adjust, e.clock, e.withoutWebhooks = opts.Controllers, opts.Manager, opts.Clock, opts.WithoutWebhooks
	if err := e.startManager(opts.Controllers); err != nil {
		return nil, errors.Join(err, e.stopControlPlane())
	}
	return e, nil
}

func (e *Env) startManager(controllers []string) error {
	hooks := e.env.WebhookInstallOptions
	o := manager.DefaultOptions()
	o.Controllers = controllers
	o.Clock = e.clock
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.WebhookHost, o.WebhookPort, o.WebhookCertDir = hooks.LocalServingHost, hooks.LocalServingPort, hooks.LocalServingCertDir
	// The agentrax MCP registry on an ephemeral loopback port (packages run in parallel), its ConfigMap in a
	// namespace that always exists.
	o.RegistryBindAddress, o.RegistryNamespace = "127.0.0.1:0", "default"
	// Tests run many objects at once; leave flow control to the API server rather than a client-side limiter.
	o.KubeAPIQPS, o.KubeAPIBurst = -1, 0
	// RestartManager builds the same controllers again in this process.
	o.SkipControllerNameValidation = true
	o.EnableWebhooks = !e.withoutWebhooks
	if e.adjust != nil {
		e.adjust(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, e.Config, o)
	if err != nil {
		cancel()
		return err
	}
	e.Manager, e.cancel, e.done = mgr, cancel, make(chan error, 1)
	go func() { e.done <- mgr.Start(ctx) }()
	// The API server calls the webhooks as soon as objects are created, so wait until they are served.
	deadline := time.Now().Add(30 * time.Second)
	// Asking a manager without webhooks for its webhook server would add one, which then fails for want of a
	// certificate.
	checker := func(*http.Request) error { return nil }
	if o.EnableWebhooks {
		checker = mgr.GetWebhookServer().StartedChecker()
	}
	for checker(nil) != nil {
		if time.Now().After(deadline) {
			cancel()
			return errors.New("webhook server did not start within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return errors.New("manager cache did not sync")
	}
	return nil
}

// RestartManager stops the running manager and starts a new one with the same controllers and options, as a
// process restart would: empty caches, fresh clients.
func (e *Env) RestartManager() error {
	if err := e.StopManager(); err != nil {
		return err
	}
	return e.StartManager()
}

// StopManager stops the running manager (a no-op when none runs): what happens next in the cluster happens
// while the operator is down, until StartManager.
func (e *Env) StopManager() error {
	if e.cancel != nil {
		e.cancel()
		err := <-e.done
		// Stopped either way: Stop must not wait for it again.
		e.cancel = nil
		if err != nil {
			return fmt.Errorf("stopping the manager: %w", err)
		}
	}
	return nil
}

// StartManager starts a new manager with the same controllers and options after StopManager.
func (e *Env) StartManager() error {
	if e.cancel != nil {
		return errors.New("the manager is running")
	}
	return e.startManager(e.controllers)
}

// Stop stops the manager and the control plane.
func (e *Env) Stop() error {
	var errs []error
	if e.cancel != nil {
		e.cancel()
		if err := <-e.done; err != nil {
			errs = append(errs, fmt.Errorf("manager: %w", err))
		}
	}
	errs = append(errs, e.stopControlPlane())
	return errors.Join(errs...)
}

// stopControlPlane stops the cluster's processes, then the API server and etcd.
func (e *Env) stopControlPlane() error {
	var errs []error
	if e.Cluster != nil {
		errs = append(errs, e.Cluster.stop())
	}
	return errors.Join(append(errs, e.env.Stop())...)
}

// Main is a TestMain body: it starts an Env with opts, stores it in *env, runs the package's tests and stops it.
// A control plane that cannot start fails the package loudly rather than skipping it.
func Main(m *testing.M, env **Env, opts Options) int {
	// Controllers react within milliseconds, but a loaded two-core CI machine can take seconds.
	gomega.SetDefaultEventuallyTimeout(30 * time.Second)
	gomega.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
	}
	return code
}

// AllControllers returns the name of every controller the operator has.
func AllControllers() []string {
	var names []string
	for _, c := range operator.Controllers() {
		names = append(names, c.Name)
	}
	return names
}

// WebhookServing returns where the API server was told the webhooks are served and the serving certificate's
// directory, for tests that run a second webhook server with the same certificate.
func (e *Env) WebhookServing() envtest.WebhookInstallOptions {
	return e.env.WebhookInstallOptions
}

// AddAdminKubeconfig returns a kubeconfig for a cluster administrator of this control plane.
func (e *Env) AddAdminKubeconfig(user string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// AddUserKubeconfig returns a kubeconfig for user in groups (none: only system:authenticated), who may do what RBAC
// grants that name or those groups and nothing more.
func (e *Env) AddUserKubeconfig(user string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

// InstallCRDs installs the CRDs at paths for the rest of the test and removes them when it ends, waiting (with a
// deadline) until their groups are no longer served, so a later test of the package sees the plane as it started.
// A test that needs a kind the plane leaves out on purpose (e.g. cert-manager's, for a dry run) uses it.
func (e *Env) InstallCRDs(t testing.TB, paths ...string) {
	t.Helper()
	opts := envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, Scheme: e.env.Scheme}
	crds, err := envtest.InstallCRDs(e.Config, opts)
	if err != nil {
		t.Fatalf("installing CRDs %v: %v", paths, err)
	}
	t.Cleanup(func() {
		if err := envtest.UninstallCRDs(e.Config, opts); err != nil {
			t.Errorf("removing CRDs %v: %v", paths, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, crd := range crds {
			// Unstructured: the tests' scheme need not know apiextensions.
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				err := e.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, live)
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
			if err != nil {
				t.Errorf("CRD %s still exists 2 minutes after its deletion: %v", crd.GetName(), err)
			}
		}
	})
}
