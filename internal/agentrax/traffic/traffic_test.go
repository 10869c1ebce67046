package traffic

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

func ref(name string, weight *int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name)}, Weight: weight}}
}

func rule(refs ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{BackendRefs: refs}
}

func TestWeights(t *testing.T) {
	other := ref("other", ptr.To[int32](5))
	other.Kind = ptr.To(gatewayv1.Kind("Bucket"))
	for name, tc := range map[string]struct {
		rules          []gatewayv1.HTTPRouteRule
		stable, canary int32
		ok             bool
	}{
		"stable only":          {[]gatewayv1.HTTPRouteRule{rule(ref("bot", ptr.To[int32](100)))}, 100, 0, true},
		"split":                {[]gatewayv1.HTTPRouteRule{rule(ref("bot", ptr.To[int32](75)), ref("bot-canary", ptr.To[int32](25)))}, 75, 25, true},
		"weight defaults to 1": {[]gatewayv1.HTTPRouteRule{rule(ref("bot", nil), ref("bot-canary", ptr.To[int32](0)))}, 1, 0, true},
		"rules agree":          {[]gatewayv1.HTTPRouteRule{rule(ref("bot", ptr.To[int32](50)), ref("bot-canary", ptr.To[int32](50))), rule(ref("other-svc", nil)), rule(ref("bot-canary", ptr.To[int32](50)), ref("bot", ptr.To[int32](50)))}, 50, 50, true},
		"rules disagree":       {[]gatewayv1.HTTPRouteRule{rule(ref("bot", ptr.To[int32](50)), ref("bot-canary", ptr.To[int32](50))), rule(ref("bot", ptr.To[int32](100)))}, 0, 0, false},
		"no stable backend":    {[]gatewayv1.HTTPRouteRule{rule(ref("bot-canary", ptr.To[int32](100)))}, 0, 0, false},
		"not a Service is not stable": {[]gatewayv1.HTTPRouteRule{rule(func() gatewayv1.HTTPBackendRef {
			r := ref("bot", nil)
			r.Kind = ptr.To(gatewayv1.Kind("Bucket"))
			return r
		}())}, 0, 0, false},
		"unrelated backends ignored": {[]gatewayv1.HTTPRouteRule{rule(ref("bot", ptr.To[int32](90)), other)}, 90, 0, true},
	} {
		t.Run(name, func(t *testing.T) {
			route := &gatewayv1.HTTPRoute{Spec: gatewayv1.HTTPRouteSpec{Rules: tc.rules}}
			s, c, ok := Weights(route, "bot", "bot-canary")
			NewWithT(t).Expect([]any{s, c, ok}).To(Equal([]any{tc.stable, tc.canary, tc.ok}))
		})
	}
}

func TestAccepted(t *testing.T) {
	parent := gatewayv1.ParentReference{Name: "gw", SectionName: ptr.To(gatewayv1.SectionName("https"))}
	other := gatewayv1.ParentReference{Name: "gw2", Namespace: ptr.To(gatewayv1.Namespace("infra"))}
	status := func(p gatewayv1.ParentReference, s metav1.ConditionStatus, gen int64) gatewayv1.RouteParentStatus {
		return gatewayv1.RouteParentStatus{ParentRef: p, ControllerName: "example.net/gw", Conditions: []metav1.Condition{{
			Type: "Accepted", Status: s, ObservedGeneration: gen, Reason: "x"}}}
	}
	for name, tc := range map[string]struct {
		refs   []gatewayv1.ParentReference
		status []gatewayv1.RouteParentStatus
		want   bool
	}{
		"accepted": {[]gatewayv1.ParentReference{parent}, []gatewayv1.RouteParentStatus{status(parent, metav1.ConditionTrue, 3)}, true},
		"explicit defaults match": {[]gatewayv1.ParentReference{parent}, []gatewayv1.RouteParentStatus{status(func() gatewayv1.ParentReference {
			p := parent
			p.Namespace = ptr.To(gatewayv1.Namespace("team"))
			p.Kind = ptr.To(gatewayv1.Kind("Gateway"))
			p.Group = ptr.To(gatewayv1.Group(gatewayv1.GroupName))
			return p
		}(), metav1.ConditionTrue, 3)}, true},
		"older generation":           {[]gatewayv1.ParentReference{parent}, []gatewayv1.RouteParentStatus{status(parent, metav1.ConditionTrue, 2)}, false},
		"refused":                    {[]gatewayv1.ParentReference{parent}, []gatewayv1.RouteParentStatus{status(parent, metav1.ConditionFalse, 3)}, false},
		"one parent of two":          {[]gatewayv1.ParentReference{parent, other}, []gatewayv1.RouteParentStatus{status(parent, metav1.ConditionTrue, 3)}, false},
		"both parents":               {[]gatewayv1.ParentReference{parent, other}, []gatewayv1.RouteParentStatus{status(other, metav1.ConditionTrue, 3), status(parent, metav1.ConditionTrue, 3)}, true},
		"another listener":           {[]gatewayv1.ParentReference{parent}, []gatewayv1.RouteParentStatus{status(gatewayv1.ParentReference{Name: "gw"}, metav1.ConditionTrue, 3)}, false},
		"no parents, never accepted": {nil, nil, false},
		"no status":                  {[]gatewayv1.ParentReference{parent}, nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Generation: 3}}
			route.Spec.ParentRefs = tc.refs
			route.Status.Parents = tc.status
			NewWithT(t).Expect(Accepted(route)).To(Equal(tc.want))
		})
	}
}

func TestOwnedRouteSpec(t *testing.T) {
	g := NewWithT(t)
	spec := &agentraxv1alpha1.OwnedRouteSpec{
		ParentRefs: []agentraxv1alpha1.GatewayParentRef{{Name: "shared", Namespace: "gateways", SectionName: "https"}},
		Hostnames:  []string{"bot.example.com"},
		Matches: []agentraxv1alpha1.RouteMatch{{Path: &agentraxv1alpha1.RoutePathMatch{Type: "Exact", Value: "/v1/chat"},
			Headers: []agentraxv1alpha1.RouteHeaderMatch{{Name: "X-Tenant", Value: "alpha"}}}},
	}
	out := OwnedRouteSpec(spec, "bot", "bot-canary", 8080, 75, 25)
	g.Expect(out.ParentRefs).To(HaveLen(1))
	g.Expect(*out.ParentRefs[0].Namespace).To(BeEquivalentTo("gateways"))
	g.Expect(*out.ParentRefs[0].SectionName).To(BeEquivalentTo("https"))
	g.Expect(*out.ParentRefs[0].Kind).To(BeEquivalentTo("Gateway"))
	g.Expect(out.Hostnames).To(HaveExactElements(gatewayv1.Hostname("bot.example.com")))
	g.Expect(out.Rules).To(HaveLen(1))
	m := out.Rules[0].Matches[0]
	g.Expect(*m.Path.Type).To(Equal(gatewayv1.PathMatchExact))
	g.Expect(*m.Path.Value).To(Equal("/v1/chat"))
	g.Expect(m.Headers[0].Name).To(BeEquivalentTo("X-Tenant"))
	s, c, ok := Weights(&gatewayv1.HTTPRoute{Spec: out}, "bot", "bot-canary")
	g.Expect([]any{s, c, ok}).To(Equal([]any{int32(75), int32(25), true}))
	g.Expect(*out.Rules[0].BackendRefs[1].Port).To(BeEquivalentTo(8080))

	// At 100/0 the canary Service is not referenced; no matches means every path on the hostnames.
	out = OwnedRouteSpec(&agentraxv1alpha1.OwnedRouteSpec{ParentRefs: []agentraxv1alpha1.GatewayParentRef{{Name: "shared"}}},
		"bot", "bot-canary", 8080, 100, 0)
	g.Expect(out.Rules[0].BackendRefs).To(HaveLen(1))
	g.Expect(*out.Rules[0].Matches[0].Path.Value).To(Equal("/"))
	g.Expect(*out.Rules[0].Matches[0].Path.Type).To(Equal(gatewayv1.PathMatchPathPrefix))
	g.Expect(out.ParentRefs[0].Namespace).To(BeNil(), "the route's own namespace")
}
