package realnode

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The helpers the NetworkPolicy traffic tests share: a stand-in pod that serves the ports of the pod a policy
// protects, and checks that ask another pod to reach it.

// standIn is netprobe with the labels and container ports of the pod a policy protects: it answers HTTP on every
// TCP port and echoes UDP on udpPorts, and its readiness probe (which the kubelet sends from the node) targets the
// named port probePort, as the real pod's does.
func standIn(ns, name string, labels map[string]string, ports []corev1.ContainerPort, probePort string, udpPorts ...int32) *corev1.Pod {
	pod := probePod(ns, name, labels)
	var listen, udp []string
	for _, p := range ports {
		listen = append(listen, fmt.Sprintf(":%d", p.ContainerPort))
	}
	for _, p := range udpPorts {
		udp = append(udp, fmt.Sprintf(":%d", p))
	}
	ctr := &pod.Spec.Containers[0]
	ctr.Args = []string{"--listen=" + strings.Join(listen, ",")}
	if len(udp) > 0 {
		ctr.Args = append(ctr.Args, "--udp="+strings.Join(udp, ","))
	}
	ctr.Ports = ports
	ctr.ReadinessProbe.HTTPGet.Port = intstr.FromString(probePort)
	return pod
}

// reach returns a check that pod from GETs /healthz on TCP port of pod to: nil when it answers 200.
func reach(from, to *corev1.Pod, port int32) func() error {
	return func() error {
		status, body, err := fetchFrom(from, fmt.Sprintf("http://%s/healthz", net.JoinHostPort(to.Status.PodIP, strconv.Itoa(int(port)))))
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("%s/%s → %s/%s TCP %d: %d %s", from.Namespace, from.Name, to.Namespace, to.Name, port, status, body)
		}
		return nil
	}
}

// reachUDP returns a check that pod from gets the echo of a datagram it sends to UDP port of pod to.
func reachUDP(from, to *corev1.Pod, port int32) func() error {
	return func() error {
		addr := net.JoinHostPort(to.Status.PodIP, strconv.Itoa(int(port)))
		status, body, err := get(fmt.Sprintf("http://%s:8080/udp?addr=%s", from.Status.PodIP, url.QueryEscape(addr)))
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("%s/%s → %s/%s UDP %d: %d %s", from.Namespace, from.Name, to.Namespace, to.Name, port, status, body)
		}
		return nil
	}
}

// staysReady checks for a few seconds that pod keeps passing its readiness probe: the kubelet probes from the
// node, which a policy must not cut off.
func staysReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
	}, 5*time.Second, time.Second).Should(Succeed(), "the kubelet's readiness probe of %s/%s", pod.Namespace, pod.Name)
}

// asNetworkPolicy converts a rendered object to a NetworkPolicy, refusing fields the type does not know.
func asNetworkPolicy(t *testing.T, obj map[string]any) *networkingv1.NetworkPolicy {
	t.Helper()
	np := &networkingv1.NetworkPolicy{}
	NewWithT(t).Expect(runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, np, true)).To(Succeed())
	return np
}
