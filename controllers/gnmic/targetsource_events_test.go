package gnmic_test

import (
	"context"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// eventReasons lists the reasons of the events recorded about an object.
func eventReasons(g Gomega, ns, name string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func mustUnstructured(g Gomega, doc string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	return u
}
