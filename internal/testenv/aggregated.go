package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AggregatedAPI is an API server that kube-apiserver serves through its aggregation layer, as in a cluster: a local
// process behind a Service of the simulated cluster (reached through the ServiceRouter), registered as an
// APIService.
type AggregatedAPI struct {
	// Name names the process (its log is <LogDir>/<Name>.log), the Service and the kubeconfig's user.
	Name string
	// Namespace holds the Service and its EndpointSlice (default kube-system).
	Namespace string
	// Group and Version are the APIService's.
	Group, Version string
	// Binary is the server's executable.
	Binary string
	// Args returns the server's flags, given where and how it must serve.
	Args func(AggregatedServing) []string
	// Env is added to the process's environment.
	Env []string
	// Timeout bounds the wait for the APIService to turn Available (default 1 min).
	Timeout time.Duration
	// InCluster runs the server as in a pod, for one that reads rest.InClusterConfig whatever its flags say:
	// chrooted into a root of its own holding the binary and the serving files, with KUBERNETES_SERVICE_HOST and
	// KUBERNETES_SERVICE_PORT naming the API server and /var/run/secrets/kubernetes.io/serviceaccount holding its
	// CA and a token of the ServiceAccount <Namespace>/<Name>, which may delegate authentication and authorization
	// (system:auth-delegator) and read everything (view). The paths given to Args are then the server's own.
	InCluster bool
}

// AggregatedServing is what StartAggregatedAPI prepared for the server's flags.
type AggregatedServing struct {
	// Port is a free loopback port to serve HTTPS on (bind 127.0.0.1).
	Port int
	// CertFile and KeyFile are a self-signed serving certificate for the Service's DNS name and 127.0.0.1; the
	// APIService's caBundle is that certificate.
	CertFile, KeyFile string
	// Kubeconfig is a cluster administrator's kubeconfig: for the server's own reads and for delegated
	// authentication (the front-proxy CA the API server publishes in kube-system) and authorization.
	Kubeconfig string
	// Dir is the server's own directory, for more files (a configuration).
	Dir string
	// Root is the host directory the server is chrooted into with InCluster (so its files are under Root),
	// empty without.
	Root string
}

// AggregatedServer is an aggregated API server started by StartAggregatedAPI.
type AggregatedServer struct {
	// Process is the server's process.
	*Process
	// APIService is the name of its APIService (<version>.<group>).
	APIService string

	undo []func() error
}

// Stop unregisters the APIService, Service, EndpointSlice and route, then stops the process.
func (s *AggregatedServer) Stop() error {
	var errs []error
	for i := len(s.undo) - 1; i >= 0; i-- {
		errs = append(errs, s.undo[i]())
	}
	if s.Process != nil {
		errs = append(errs, s.Process.Stop())
	}
	return errors.Join(errs...)
}

// aggregatedEndpoint is the address of the simulated pod behind an aggregated API's Service. It is never dialled:
// the aggregator resolves the Service to its ClusterIP, which the router sends to the local process; the
// availability controller only needs a ready endpoint, as a pod would give it.
const aggregatedEndpoint = "10.244.255.254"

// StartAggregatedAPI runs api's server beside the cluster and registers it as an APIService; it returns once the API
// server reports the APIService Available, or an error naming its conditions and the server's log when it does not
// within api.Timeout. Needs Options.Cluster (the Service router and front-proxy certificates).
func (e *Env) StartAggregatedAPI(ctx context.Context, api AggregatedAPI) (*AggregatedServer, error) {
	if e.Cluster == nil {
		return nil, errors.New("testenv: an aggregated API needs Options.Cluster")
	}
	if api.Namespace == "" {
		api.Namespace = metav1.NamespaceSystem
	}
	if api.Timeout == 0 {
		api.Timeout = time.Minute
	}
	dir, err := os.MkdirTemp(e.Cluster.dir, api.Name+"-")
	if err != nil {
		return nil, err
	}
	s := &AggregatedServer{APIService: api.Version + "." + api.Group}
	serving := AggregatedServing{Dir: dir}
	binary, processEnv := api.Binary, api.Env
	if api.InCluster {
		if binary, processEnv, err = e.podRoot(ctx, api, dir, s); err != nil {
			return nil, errors.Join(err, s.Stop())
		}
		serving.Root, serving.Dir = dir, "/srv"
	}
	host := filepath.Join(serving.Root, serving.Dir)
	if err := os.MkdirAll(host, 0o700); err != nil {
		return nil, err
	}
	caPEM, err := writeServingCert(host, api.Name+"."+api.Namespace+".svc")
	if err != nil {
		return nil, err
	}
	serving.CertFile, serving.KeyFile = filepath.Join(serving.Dir, "tls.crt"), filepath.Join(serving.Dir, "tls.key")
	kubeconfig, err := e.AddAdminKubeconfig(api.Name)
	if err != nil {
		return nil, err
	}
	serving.Kubeconfig = filepath.Join(serving.Dir, "kubeconfig")
	if err := os.WriteFile(filepath.Join(host, "kubeconfig"), kubeconfig, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	serving.Port = ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return nil, err
	}
	child, err := startChildIn(e.Cluster.dir, api.Name, serving.Root, processEnv, binary, api.Args(serving)...)
	if err != nil {
		return nil, err
	}
	e.Cluster.children = append(e.Cluster.children, child)
	s.Process = &Process{child: child}
	if err := e.registerAggregatedAPI(ctx, api, serving.Port, caPEM, s); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	if err := e.waitAPIServiceAvailable(ctx, s, api.Timeout); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// registerAggregatedAPI creates the Service, its ready EndpointSlice, the route to the local port and the
// APIService, recording in s how to undo each.
func (e *Env) registerAggregatedAPI(ctx context.Context, api AggregatedAPI, port int, caPEM []byte, s *AggregatedServer) error {
	const https = "https"
	create := func(obj client.Object) error { return e.createUndone(ctx, obj, s) }
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: api.Namespace, Name: api.Name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: https, Port: 443}}}}
	if err := create(svc); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: api.Namespace, Name: api.Name,
			Labels: map[string]string{discoveryv1.LabelServiceName: api.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{aggregatedEndpoint},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(https), Port: ptr.To[int32](443)}},
	}
	if err := create(slice); err != nil {
		return err
	}
	route := ServicePort{Namespace: api.Namespace, Name: api.Name, Port: 443}
	e.Cluster.Router.Route(route, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	s.undo = append(s.undo, func() error { e.Cluster.Router.Unroute(route); return nil })
	return create(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": s.APIService},
		"spec": map[string]any{
			"group": api.Group, "version": api.Version,
			"service":  map[string]any{"namespace": api.Namespace, "name": api.Name, "port": int64(443)},
			"caBundle": base64.StdEncoding.EncodeToString(caPEM), "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}})
}

// createUndone creates obj and records in s how to delete it.
func (e *Env) createUndone(ctx context.Context, obj client.Object, s *AggregatedServer) error {
	if err := e.Client.Create(ctx, obj); err != nil {
		return err
	}
	s.undo = append(s.undo, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return client.IgnoreNotFound(e.Client.Delete(ctx, obj))
	})
	return nil
}

// waitAPIServiceAvailable polls the APIService until its Available condition is True; the server's exit ends the
// wait at once.
func (e *Env) waitAPIServiceAvailable(ctx context.Context, s *AggregatedServer, timeout time.Duration) error {
	var conds []any
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := s.Exited(); err != nil {
			return false, err
		}
		got := &unstructured.Unstructured{}
		got.SetAPIVersion("apiregistration.k8s.io/v1")
		got.SetKind("APIService")
		if err := e.Client.Get(ctx, client.ObjectKey{Name: s.APIService}, got); err != nil {
			return false, err
		}
		conds, _, _ = unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		out, _ := os.ReadFile(s.LogFile())
		if len(out) > 8000 {
			out = out[len(out)-8000:]
		}
		return fmt.Errorf("APIService %s not Available (conditions %v): %w; server log %s (tail):\n%s",
			s.APIService, conds, err, s.LogFile(), out)
	}
	return nil
}

// writeServingCert writes a self-signed serving certificate for dnsName and 127.0.0.1 into dir (tls.crt, tls.key)
// and returns it as PEM (an APIService's caBundle).
func writeServingCert(dir, dnsName string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), caPEM, 0o600); err != nil {
		return nil, err
	}
	return caPEM, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// serviceAccountDir is where rest.InClusterConfig reads a pod's token and cluster CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// podRoot lays out root as a pod's file system for api's server: the binary, and its ServiceAccount's token and
// the API server's CA where rest.InClusterConfig reads them. It returns the binary's path inside root and the
// process environment naming the API server. The ServiceAccount and its bindings are undone with s.
func (e *Env) podRoot(ctx context.Context, api AggregatedAPI, root string, s *AggregatedServer) (string, []string, error) {
	apiServer, err := url.Parse(e.Config.Host)
	if err != nil {
		return "", nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: api.Namespace, Name: api.Name}}
	if err := e.createUndone(ctx, sa, s); err != nil {
		return "", nil, err
	}
	for _, role := range []string{"system:auth-delegator", "view"} {
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: api.Name + ":" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: api.Namespace, Name: api.Name}}}
		if err := e.createUndone(ctx, binding, s); err != nil {
			return "", nil, err
		}
	}
	token := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := e.Client.SubResource("token").Create(ctx, sa, token); err != nil {
		return "", nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", api.Namespace, api.Name, err)
	}
	secrets := filepath.Join(root, serviceAccountDir)
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		return "", nil, err
	}
	for name, data := range map[string][]byte{
		"token": []byte(token.Status.Token), "ca.crt": e.Config.CAData, "namespace": []byte(api.Namespace),
	} {
		if err := os.WriteFile(filepath.Join(secrets, name), data, 0o600); err != nil {
			return "", nil, err
		}
	}
	binary := "/" + filepath.Base(api.Binary)
	if err := CopyFile(api.Binary, filepath.Join(root, binary), 0o755); err != nil {
		return "", nil, err
	}
	env := append([]string{"KUBERNETES_SERVICE_HOST=" + apiServer.Hostname(), "KUBERNETES_SERVICE_PORT=" + apiServer.Port()}, api.Env...)
	return binary, env, nil
}

// CopyFile copies src to dst, created (or truncated) with mode.
func CopyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
