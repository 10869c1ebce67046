package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServicePort names one port of a Service.
type ServicePort struct {
	Namespace, Name string
	Port            int32
}

func (s ServicePort) String() string { return fmt.Sprintf("%s.%s.svc:%d", s.Name, s.Namespace, s.Port) }

// ServiceRouter lets the API server reach Services whose pods are simulated. kube-apiserver sends its "cluster"
// egress (webhook calls, aggregated APIs, the service proxy) through this HTTP CONNECT proxy
// (--egress-selector-config-file); the proxy maps the Service ClusterIP:port the API server resolved (or, for the
// service proxy, the ready endpoint of a simulated pod it picked) to the local listener a test registered with
// Route. EndpointSlices cannot hold loopback addresses, so this is the one place
// where a Service of the simulated cluster meets a local process. Loopback destinations (envtest's URL-configured
// webhooks) pass through unchanged, and so do Services whose pods run for real on a network registered with
// PassThrough (a real node's bridge); anything else is refused with 502 naming the destination.
type ServiceRouter struct {
	ln     net.Listener
	server *http.Server

	mu     sync.Mutex
	routes map[ServicePort]string
	// byIP maps a ClusterIP:port, or a ready endpoint's address:port, to the Service ports behind it (several
	// Services may select the same pod port); filled on demand.
	byIP map[string][]ServicePort
	// readyEndpoints maps a Service port to the addresses of its ready endpoints; filled with byIP.
	readyEndpoints map[ServicePort][]net.IP
	// passThrough are the networks where pods run for real (PassThrough).
	passThrough []*net.IPNet
	reader      client.Reader
}

// startServiceRouter listens on a Unix socket in dir: kube-apiserver's HTTP CONNECT egress over TCP insists on
// TLS (it dereferences a nil TLS configuration for an http:// URL in 1.37), over a Unix socket it speaks plain.
func startServiceRouter(dir string) (*ServiceRouter, error) {
	ln, err := net.Listen("unix", filepath.Join(dir, "egress.sock"))
	if err != nil {
		return nil, err
	}
	r := &ServiceRouter{ln: ln, routes: map[ServicePort]string{}, byIP: map[string][]ServicePort{}}
	r.server = &http.Server{Handler: http.HandlerFunc(r.serveConnect), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.server.Serve(ln) }()
	return r, nil
}

// Route sends the API server's connections to the Service port to local (host:port).
func (r *ServiceRouter) Route(svc ServicePort, local string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[svc] = local
}

// Unroute removes a route: the API server's connections to that Service port fail again.
func (r *ServiceRouter) Unroute(svc ServicePort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.routes, svc)
}

// PassThrough lets the API server's connections reach pods on network (a CIDR, e.g. a real node's pod bridge) as
// they would in a real cluster: a Service port with no local route whose ready endpoints are there is dialled at
// the address the API server chose (its ClusterIP, which the node's kube-proxy translates; or the endpoint
// itself, for the service proxy).
func (r *ServiceRouter) PassThrough(network string) error {
	_, n, err := net.ParseCIDR(network)
	if err != nil {
		return fmt.Errorf("service router: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passThrough = append(r.passThrough, n)
	return nil
}

// real reports whether ip is on a network registered with PassThrough; the caller holds r.mu.
func (r *ServiceRouter) real(ip net.IP) bool {
	for _, n := range r.passThrough {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// writeEgressConfig writes the EgressSelectorConfiguration that points the API server's cluster egress here.
func (r *ServiceRouter) writeEgressConfig(dir string) (string, error) {
	path := filepath.Join(dir, "egress-selector.yaml")
	data := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, r.ln.Addr())
	return path, os.WriteFile(path, []byte(data), 0o600)
}

func (r *ServiceRouter) close() { _ = r.server.Close() }

func (r *ServiceRouter) serveConnect(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodConnect {
		http.Error(w, "only CONNECT is served", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	defer cancel()
	local, err := r.destination(ctx, req.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	upstream, err := (&net.Dialer{}).DialContext(ctx, "tcp", local)
	if err != nil {
		http.Error(w, fmt.Sprintf("%s routes to %s: %v", req.Host, local, err), http.StatusBadGateway)
		return
	}
	conn, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	pipe(conn, buffered, upstream)
}

// destination maps the CONNECT target to a local address.
func (r *ServiceRouter) destination(ctx context.Context, target string) (string, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Errorf("CONNECT target %q: %w", target, err)
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return target, nil
	}
	if local, ok := r.lookup(target); ok {
		return local, nil
	}
	r.mu.Lock()
	realPod := ip != nil && r.real(ip)
	r.mu.Unlock()
	if realPod {
		return target, nil
	}
	if err := r.refresh(ctx); err != nil {
		return "", fmt.Errorf("resolving %s to a Service: %w", target, err)
	}
	if local, ok := r.lookup(target); ok {
		return local, nil
	}
	r.mu.Lock()
	services, known := r.byIP[net.JoinHostPort(host, port)]
	var realEndpoint bool
	for _, svc := range services {
		for _, addr := range r.readyEndpoints[svc] {
			realEndpoint = realEndpoint || r.real(addr)
		}
	}
	r.mu.Unlock()
	if realEndpoint {
		return target, nil
	}
	if known {
		return "", fmt.Errorf("service %v (%s) has no local route and no ready pod on a real node: register one with ServiceRouter.Route", services, target)
	}
	return "", fmt.Errorf("%s is no Service port of this cluster", target)
}

func (r *ServiceRouter) lookup(target string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, svc := range r.byIP[target] {
		if local, ok := r.routes[svc]; ok {
			return local, true
		}
	}
	return "", false
}

// refresh rebuilds the ClusterIP and endpoint index from the API server (on a miss only: connections are long-lived).
func (r *ServiceRouter) refresh(ctx context.Context) error {
	r.mu.Lock()
	reader := r.reader
	r.mu.Unlock()
	if reader == nil {
		return fmt.Errorf("the control plane is not up yet")
	}
	var services corev1.ServiceList
	if err := reader.List(ctx, &services); err != nil {
		return err
	}
	byIP := map[string][]ServicePort{}
	for _, s := range services.Items {
		for _, ip := range s.Spec.ClusterIPs {
			if ip == "" || ip == corev1.ClusterIPNone {
				continue
			}
			for _, p := range s.Spec.Ports {
				addr := net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
				byIP[addr] = append(byIP[addr], ServicePort{s.Namespace, s.Name, p.Port})
			}
		}
	}
	// The API server's service proxy (services/{name}:{port}/proxy) dials a ready endpoint, not the ClusterIP: the
	// addresses of the simulated pods, by the port name the Service and its EndpointSlices share.
	servicePorts := map[string]ServicePort{} // namespace/service/port name → Service port
	for _, s := range services.Items {
		for _, p := range s.Spec.Ports {
			servicePorts[s.Namespace+"/"+s.Name+"/"+p.Name] = ServicePort{s.Namespace, s.Name, p.Port}
		}
	}
	var slices discoveryv1.EndpointSliceList
	if err := reader.List(ctx, &slices); err != nil {
		return err
	}
	readyEndpoints := map[ServicePort][]net.IP{}
	for _, slice := range slices.Items {
		service := slice.Labels[discoveryv1.LabelServiceName]
		for _, p := range slice.Ports {
			svc, ok := servicePorts[slice.Namespace+"/"+service+"/"+ptr.Deref(p.Name, "")]
			if !ok || p.Port == nil {
				continue
			}
			for _, e := range slice.Endpoints {
				for _, addr := range e.Addresses {
					endpoint := net.JoinHostPort(addr, strconv.Itoa(int(*p.Port)))
					byIP[endpoint] = append(byIP[endpoint], svc)
					if ip := net.ParseIP(addr); ip != nil && ptr.Deref(e.Conditions.Ready, true) {
						readyEndpoints[svc] = append(readyEndpoints[svc], ip)
					}
				}
			}
		}
	}
	r.mu.Lock()
	r.byIP = byIP
	r.readyEndpoints = readyEndpoints
	r.mu.Unlock()
	return nil
}

// pipe copies both ways until either side closes.
func pipe(client net.Conn, buffered *bufio.ReadWriter, upstream net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(upstream, buffered)
		if tcp, ok := upstream.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, upstream)
		if tcp, ok := client.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
	_ = client.Close()
	_ = upstream.Close()
}
