package testenv

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ClusterOptions make the control plane a cluster in all but the container runtime: beside etcd and kube-apiserver
// run kube-controller-manager (garbage collector, namespace, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
// EndpointSlice, HPA, ServiceAccount and token, disruption, node lifecycle, …), kube-scheduler and kwok, which
// simulates the kubelets of Nodes: pods are scheduled, get an IP and turn Running and Ready, but no container runs.
// Every namespace enforces the Pod Security "restricted" level unless it says otherwise.
type ClusterOptions struct {
	// Nodes is the number of simulated nodes (default 2). Each offers 1000 CPUs, 4Ti, 2000 pods and 64
	// nvidia.com/gpu: room for every test package's agents.
	Nodes int
	// HPASyncPeriod is the HPA controller's sync period (default 2s; a real cluster's is 15s).
	HPASyncPeriod time.Duration
	// HPADownscaleStabilization is the HPA controller's downscale stabilization window (default 0s, 5m in a real
	// cluster), so tests see a scale-down at once.
	HPADownscaleStabilization time.Duration
	// ExtraStages are more kwok Stage documents (YAML), for tests that inject kubelet failures on purpose.
	ExtraStages []byte
	// AuditPolicy, when set, is an audit.k8s.io/v1 Policy (YAML) the API server applies, writing JSON lines to
	// Cluster.AuditLogPath.
	AuditPolicy string
	// APIServerFlags are more kube-apiserver flags (name without dashes → value).
	APIServerFlags map[string]string
	// AdvertiseAddress, when set, is the address pods reach the API server at (a real node's bridge address, where
	// the node forwards connections to the API server's loopback port). The API server advertises it, so its
	// endpoint reconciler publishes it as the `kubernetes` Service's endpoint, and its serving certificate names
	// it, the Service's ClusterIP (KubernetesServiceIP) and InClusterAPIServerNames beside localhost and 127.0.0.1.
	// The API server still listens on 127.0.0.1 only.
	AdvertiseAddress string
}

// Simulated-cluster facts tests can rely on.
const (
	// PodCIDR is where kwok gives pods their IPs; it does not overlap the Service range.
	PodCIDR = "10.244.0.0/16"
	// ServiceCIDR is the Service ClusterIP range.
	ServiceCIDR = "10.0.0.0/16"
	// SimulatedNodeAnnotation marks the Nodes kwok manages.
	SimulatedNodeAnnotation = "kwok.x-k8s.io/node"
	// PodSecurityEnforceLabel is the namespace label of the enforced Pod Security level.
	PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"
)

//go:embed kwok/stages.yaml
var kwokStages []byte

// Cluster is the part of a cluster-grade control plane beyond the API server.
type Cluster struct {
	// Router maps Services to local listeners for the API server's own connections (webhooks, aggregated APIs).
	Router *ServiceRouter

	opts     ClusterOptions
	dir      string
	children []*childProcess
}

// prepareCluster configures kube-apiserver for a cluster before it starts: Pod Security defaults, the egress proxy
// to local processes, and the front-proxy certificates aggregated APIs need.
func prepareCluster(env *envtest.Environment, opts ClusterOptions) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.HPASyncPeriod == 0 {
		opts.HPASyncPeriod = 2 * time.Second
	}
	dir, err := os.MkdirTemp("", "quartet-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, dir: dir}
	if c.Router, err = startServiceRouter(dir); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	egress, err := c.Router.writeEgressConfig(dir)
	if err != nil {
		return nil, errors.Join(err, c.cleanup())
	}
	proxy, err := writeFrontProxyPKI(dir)
	if err != nil {
		return nil, errors.Join(err, c.cleanup())
	}
	kubeletClient, err := writeKubeletClientPKI(dir)
	if err != nil {
		return nil, errors.Join(err, c.cleanup())
	}
	admission := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(admission, []byte(admissionConfig), 0o600); err != nil {
		return nil, errors.Join(err, c.cleanup())
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	if opts.AuditPolicy != "" {
		policy := filepath.Join(dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(opts.AuditPolicy), 0o600); err != nil {
			return nil, errors.Join(err, c.cleanup())
		}
		args.Set("audit-policy-file", policy)
		args.Set("audit-log-path", c.AuditLogPath())
		args.Set("audit-log-format", "json")
		// Written as each request completes, so a test reads what happened so far.
		args.Set("audit-log-mode", "blocking")
	}
	// A real cluster runs the ServiceAccount admission plugin (envtest turns it off: no controller made the
	// default ServiceAccount there).
	args.Disable("disable-admission-plugins")
	args.Set("admission-control-config-file", admission)
	args.Set("egress-selector-config-file", egress)
	args.Set("requestheader-client-ca-file", proxy.CA)
	args.Set("requestheader-allowed-names", frontProxyClientName)
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("proxy-client-cert-file", proxy.ClientCert)
	args.Set("proxy-client-key-file", proxy.ClientKey)
	// A real kubelet (internal/testenv/realnode) trusts KubeletClientCA: pods/log, exec and port-forward work.
	args.Set("kubelet-client-certificate", kubeletClient.ClientCert)
	args.Set("kubelet-client-key", kubeletClient.ClientKey)
	if opts.AdvertiseAddress != "" {
		if err := servePods(env, dir, opts.AdvertiseAddress); err != nil {
			return nil, errors.Join(err, c.cleanup())
		}
	}
	for flag, value := range opts.APIServerFlags {
		args.Set(flag, value)
	}
	return c, nil
}

// servePods makes the API server reachable from pods at advertise: its certificate directory is filled before it
// starts (envtest then generates nothing), the CA that signed the serving certificate becomes the clients' and the
// controller-manager's root CA, and the API server advertises the address with the lease endpoint reconciler.
func servePods(env *envtest.Environment, dir, advertise string) error {
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.CertDir = filepath.Join(dir, "apiserver-pki")
	pki, err := writeAPIServerPKI(apiServer.CertDir, advertise)
	if err != nil {
		return fmt.Errorf("writing the API server's certificates: %w", err)
	}
	apiServer.CA = pki.CA
	args := apiServer.Configure()
	args.Set("advertise-address", advertise)
	args.Set("endpoint-reconciler-type", "lease")
	return nil
}

// AdvertiseAddress is where pods reach the API server (ClusterOptions.AdvertiseAddress), empty when they cannot.
func (c *Cluster) AdvertiseAddress() string { return c.opts.AdvertiseAddress }

// admissionConfig makes "restricted" the Pod Security level of every namespace that does not choose one
// (kube-system excepted, as on managed clusters).
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: restricted
      enforce-version: latest
      warn: restricted
      warn-version: latest
    exemptions:
      namespaces: [kube-system]
`

// start runs the controller-manager, scheduler and kwok against the running API server, registers the simulated
// Nodes and waits until they are schedulable and the controllers work.
func (c *Cluster) start(env *envtest.Environment, admin client.Client) error {
	c.Router.mu.Lock()
	c.Router.reader = admin
	c.Router.mu.Unlock()
	kubeconfig := func(user string) (string, error) {
		u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return "", err
		}
		data, err := u.KubeConfig()
		if err != nil {
			return "", err
		}
		path := filepath.Join(c.dir, user+".kubeconfig")
		return path, os.WriteFile(path, data, 0o600)
	}
	rootCA := filepath.Join(c.dir, "ca.crt")
	if err := os.WriteFile(rootCA, env.Config.CAData, 0o600); err != nil {
		return err
	}
	assets, err := BinaryAssetsDir()
	if err != nil {
		return err
	}
	kwok, err := KwokBinary()
	if err != nil {
		return err
	}
	kcmConfig, err := kubeconfig("system:kube-controller-manager")
	if err != nil {
		return err
	}
	schedConfig, err := kubeconfig("system:kube-scheduler")
	if err != nil {
		return err
	}
	kwokConfig, err := kubeconfig("kwok")
	if err != nil {
		return err
	}
	stages := filepath.Join(c.dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, append(append(append([]byte{}, kwokStages...), "\n---\n"...), c.opts.ExtraStages...), 0o600); err != nil {
		return err
	}
	certDir := env.ControlPlane.APIServer.CertDir
	for _, p := range []struct {
		name, binary string
		args         []string
	}{
		{"kube-controller-manager", filepath.Join(assets, "kube-controller-manager"), []string{
			"--kubeconfig=" + kcmConfig, "--leader-elect=false", "--secure-port=0",
			// Node IPAM and cloud controllers have nothing to do here: kwok gives pods their IPs.
			"--controllers=*,-node-ipam-controller",
			"--use-service-account-credentials=false",
			"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
			"--root-ca-file=" + rootCA,
			"--service-cluster-ip-range=" + ServiceCIDR,
			// Test packages create hundreds of objects at once; client-side throttling at the default 20 QPS
			// would make every controller lag by seconds.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
			"--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20", "--concurrent-gc-syncs=50",
			"--concurrent-statefulset-syncs=10", "--concurrent-namespace-syncs=20",
			"--horizontal-pod-autoscaler-sync-period=" + c.opts.HPASyncPeriod.String(),
			"--horizontal-pod-autoscaler-downscale-stabilization=" + c.opts.HPADownscaleStabilization.String(),
		}},
		{"kube-scheduler", filepath.Join(assets, "kube-scheduler"), []string{
			"--kubeconfig=" + schedConfig, "--leader-elect=false", "--secure-port=0",
			"--kube-api-qps=1000", "--kube-api-burst=2000",
		}},
		{"kwok", kwok, []string{
			"--kubeconfig=" + kwokConfig, "--config=" + stages,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + SimulatedNodeAnnotation + "=fake",
			"--cidr=" + PodCIDR, "--node-ip=10.243.0.1",
			// Without a lease the node-lifecycle controller marks the nodes NotReady and evicts every pod.
			"--node-lease-duration-seconds=40",
		}},
	} {
		child, err := startChild(c.dir, p.name, p.binary, p.args...)
		if err != nil {
			return err
		}
		c.children = append(c.children, child)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.registerNodes(ctx, admin); err != nil {
		return err
	}
	return c.waitReady(ctx, admin)
}

func (c *Cluster) registerNodes(ctx context.Context, admin client.Client) error {
	for i := range c.opts.Nodes {
		name := "kwok-node-" + strconv.Itoa(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{SimulatedNodeAnnotation: "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok"},
		}}
		if err := admin.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering simulated node %s: %w", name, err)
		}
	}
	ns := &corev1.Namespace{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "default"}, ns); err != nil {
		return err
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[PodSecurityEnforceLabel] = "restricted"
	return admin.Update(ctx, ns)
}

// waitReady waits until every simulated Node is Ready without a NoSchedule taint and the controller-manager has
// made the default ServiceAccount; a child that exits fails the wait at once.
func (c *Cluster) waitReady(ctx context.Context, admin client.Client) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, child := range c.children {
			if err := child.exited(); err != nil {
				return false, err
			}
		}
		var nodes corev1.NodeList
		if err := admin.List(ctx, &nodes); err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			if nodeSchedulable(&n) {
				ready++
			}
		}
		if ready < c.opts.Nodes {
			last = fmt.Sprintf("%d of %d simulated nodes schedulable", ready, c.opts.Nodes)
			return false, nil
		}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
			last = "no default ServiceAccount yet (controller-manager): " + err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("cluster not ready: %s (logs in %s): %w", last, c.dir, err)
	}
	return err
}

func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// LogDir is where the controller-manager's, scheduler's and kwok's logs are written.
func (c *Cluster) LogDir() string { return c.dir }

// KubeletClientCA is the CA file that signed the API server's client certificate for kubelets: a real kubelet
// adds it to its client CAs so the API server's pods/log, exec and port-forward requests authenticate.
func (c *Cluster) KubeletClientCA() string { return filepath.Join(c.dir, "kubelet-client-ca.crt") }

// AuditLogPath is where the API server writes its audit log when ClusterOptions.AuditPolicy is set.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.dir, "audit.log") }

// Run starts one more process beside the cluster (an installer such as OLM, a registry server, the operator's own
// binary): its output goes to <LogDir>/<name>.log and it is stopped (SIGTERM, then SIGKILL after 10s) with the
// cluster, or earlier through the returned Process. env is added to this process's environment.
func (c *Cluster) Run(name string, env []string, binary string, args ...string) (*Process, error) {
	child, err := startChildEnv(c.dir, name, env, binary, args...)
	if err != nil {
		return nil, err
	}
	c.children = append(c.children, child)
	return &Process{child: child}, nil
}

// Process is a process started by Cluster.Run.
type Process struct{ child *childProcess }

// Exited returns an error naming the process's log once it has ended, nil while it runs.
func (p *Process) Exited() error { return p.child.exited() }

// Stop ends the process (SIGTERM, then SIGKILL after 10s); stopping it again is a no-op.
func (p *Process) Stop() error { return p.child.stop() }

// LogFile is the file the process writes its output to.
func (p *Process) LogFile() string { return p.child.log.Name() }

// stop ends the cluster's processes (before the API server stops, so they do not spin on a dead server).
func (c *Cluster) stop() error {
	var errs []error
	for i := len(c.children) - 1; i >= 0; i-- {
		if err := c.children[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, c.cleanup())...)
}

func (c *Cluster) cleanup() error {
	if c.Router != nil {
		c.Router.close()
	}
	if os.Getenv("QUARTET_TEST_KEEP_LOGS") != "" {
		return nil
	}
	return os.RemoveAll(c.dir)
}
