package asinstalled

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// RouteRefreshService checks that the Service the installer created for the TargetSource refresh API leads to the
// manager as a kube-proxy would send it there — the Service selects the manager's pods, and its port's target is
// the container port the manager's --api-bind-address listens on — and then routes the API server's connections
// to that Service port to the running manager's refresh API. It returns the Service port, for a request through
// the API server's service proxy.
func (m *Manager) RouteRefreshService(ctx context.Context, service string) (testenv.ServicePort, error) {
	port, err := m.servicePortOf(ctx, service, "api-bind-address", "")
	if err != nil {
		return testenv.ServicePort{}, err
	}
	m.env.Cluster.Router.Route(port, m.apiAddr)
	return port, nil
}

// servicePortOf is the port of the installer's Service that leads to the listener the manager's flag (a listen
// address; def when the Deployment does not pass it) starts: the Service selects the manager's pods and that
// port's target is the flag's container port.
func (m *Manager) servicePortOf(ctx context.Context, service, flag, def string) (testenv.ServicePort, error) {
	dep := &appsv1.Deployment{}
	if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: m.in.Namespace, Name: m.in.Deployment}, dep); err != nil {
		return testenv.ServicePort{}, err
	}
	container := ManagerContainer(dep)
	if container == nil {
		return testenv.ServicePort{}, fmt.Errorf("deployment %s has no container named manager", m.in.Deployment)
	}
	args := container.Args
	if _, err := flagValue(args, flag); err != nil && def != "" {
		args = append(slices.Clone(args), "--"+flag+"="+def)
	}
	listen, err := flagPort(args, flag)
	if err != nil {
		return testenv.ServicePort{}, err
	}
	svc := &corev1.Service{}
	if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: m.in.Namespace, Name: service}, svc); err != nil {
		return testenv.ServicePort{}, err
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		return testenv.ServicePort{}, fmt.Errorf("service %s selects %v, which the manager's pods (%v) do not carry",
			service, svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	for _, p := range svc.Spec.Ports {
		target, err := containerPort(container, p.TargetPort)
		if err != nil {
			return testenv.ServicePort{}, fmt.Errorf("service %s port %d: %w", service, p.Port, err)
		}
		if target == listen {
			return testenv.ServicePort{Namespace: m.in.Namespace, Name: service, Port: p.Port}, nil
		}
	}
	return testenv.ServicePort{}, fmt.Errorf("no port of service %s leads to the manager's --%s port %d", service, flag, listen)
}

// flagValue reads a flag's value (--name=value or --name value).
func flagValue(args []string, name string) (string, error) {
	for i, a := range args {
		value, ok := strings.CutPrefix(a, "--"+name+"=")
		if !ok && a == "--"+name && i+1 < len(args) {
			value, ok = args[i+1], true
		}
		if ok {
			return value, nil
		}
	}
	return "", fmt.Errorf("the manager is not started with --%s", name)
}

// flagPort reads the port of a listen-address flag (--name=host:port or --name host:port).
func flagPort(args []string, name string) (int32, error) {
	value, err := flagValue(args, name)
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(value)
	if err != nil {
		return 0, fmt.Errorf("--%s=%q: %w", name, value, err)
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("--%s=%q: %w", name, value, err)
	}
	return int32(n), nil
}

// containerPort resolves a Service target port (a number, or a container port's name) against the container.
func containerPort(c *corev1.Container, target intstr.IntOrString) (int32, error) {
	if target.Type == intstr.Int {
		return target.IntVal, nil
	}
	for _, p := range c.Ports {
		if p.Name == target.StrVal {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("target port %q names no port of container %s", target.StrVal, c.Name)
}
