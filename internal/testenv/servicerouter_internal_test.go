package testenv

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A webhook Service whose pod runs on a real node's bridge: the API server's connection to its ClusterIP passes
// through (the node's kube-proxy translates it) once that bridge is registered, and is refused before.
func TestServiceRouterPassesThroughToPodsOnARealNode(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	g.Expect(discoveryv1.AddToScheme(scheme)).To(Succeed())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "webhook"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.50", ClusterIPs: []string{"10.0.0.50"},
			Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	slice := func(name, addr string, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "op", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "webhook"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](9443)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
		}
	}
	router := func(objs ...*discoveryv1.EndpointSlice) *ServiceRouter {
		b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(svc)
		for _, o := range objs {
			b = b.WithObjects(o)
		}
		return &ServiceRouter{routes: map[ServicePort]string{}, byIP: map[string][]ServicePort{}, reader: b.Build()}
	}
	ctx := context.Background()

	r := router(slice("real", "10.245.0.12", true))
	_, err := r.destination(ctx, "10.0.0.50:443")
	g.Expect(err).To(MatchError(ContainSubstring("has no local route")), "no network passes through yet")
	g.Expect(r.PassThrough("10.245.0.0/24")).To(Succeed())
	g.Expect(r.destination(ctx, "10.0.0.50:443")).To(Equal("10.0.0.50:443"), "the ClusterIP, for kube-proxy")
	g.Expect(r.destination(ctx, "10.245.0.12:9443")).To(Equal("10.245.0.12:9443"), "the endpoint, for the service proxy")

	// A simulated pod (kwok's range) or a real pod that is not ready yet does not let the ClusterIP through.
	for _, s := range []*discoveryv1.EndpointSlice{slice("simulated", "10.244.1.7", true), slice("unready", "10.245.0.13", false)} {
		r := router(s)
		g.Expect(r.PassThrough("10.245.0.0/24")).To(Succeed())
		_, err := r.destination(ctx, "10.0.0.50:443")
		g.Expect(err).To(MatchError(ContainSubstring("no ready pod on a real node")), s.Name)
	}

	// A local route still wins: the tests that run the manager as a process keep working beside a real node.
	r = router(slice("real", "10.245.0.12", true))
	g.Expect(r.PassThrough("10.245.0.0/24")).To(Succeed())
	r.Route(ServicePort{Namespace: "op", Name: "webhook", Port: 443}, "127.0.0.1:9999")
	g.Expect(r.destination(ctx, "10.0.0.50:443")).To(Equal("127.0.0.1:9999"))
}
