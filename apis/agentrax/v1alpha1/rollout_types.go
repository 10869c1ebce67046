package v1alpha1

// Canary rollout types: the persisted stage, the insufficient-samples policy, the traffic split (an owned
// HTTPRoute or weights in a user-owned one) and the analysis metric names. internal/agentrax/rollout decides; the
// AgentDeployment controller maps these onto it (controllers/agentrax/agentdeployment_canary.go).

// RolloutStage is where a canary rollout stands; persisted so a restarted manager resumes mid-promotion or
// mid-rollback (the objects alone cannot tell one from the other).
// +kubebuilder:validation:Enum=Progressing;Promoting;RollingBack
type RolloutStage string

const (
	// StageProgressing means the canary walks through the steps.
	StageProgressing RolloutStage = "Progressing"
	// StagePromoting means every step passed; the stable Deployment takes the canary's image.
	StagePromoting RolloutStage = "Promoting"
	// StageRollingBack means traffic returns to stable, then the canary is removed.
	StageRollingBack RolloutStage = "RollingBack"
)

// InsufficientSamplesPolicy says what happens when a pause reaches its extension cap without enough samples.
// +kubebuilder:validation:Enum=Hold;Rollback
type InsufficientSamplesPolicy string

const (
	// InsufficientSamplesHold keeps the canary at its weight as inconclusive; it is never promoted unevaluated.
	InsufficientSamplesHold InsufficientSamplesPolicy = "Hold"
	// InsufficientSamplesRollback rolls the canary back as failed.
	InsufficientSamplesRollback InsufficientSamplesPolicy = "Rollback"
)

// GatewayParentRef names the Gateway (or listener of one) an operator-owned HTTPRoute attaches to.
type GatewayParentRef struct {
	// Name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the Gateway; the AgentDeployment's namespace when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// SectionName selects one listener of the Gateway.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SectionName string `json:"sectionName,omitempty"`
}

// RoutePathMatch matches the request path.
type RoutePathMatch struct {
	// Type is Exact or PathPrefix.
	// +optional
	// +kubebuilder:default=PathPrefix
	// +kubebuilder:validation:Enum=Exact;PathPrefix
	Type string `json:"type,omitempty"`
	// Value is the path, starting with "/".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// RouteHeaderMatch matches one request header exactly.
type RouteHeaderMatch struct {
	// Name of the header.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Value the header must have.
	// +required
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value"`
}

// RouteMatch selects the requests the route sends to the agent: all conditions must hold.
type RouteMatch struct {
	// Path the request must match.
	// +optional
	Path *RoutePathMatch `json:"path,omitempty"`
	// Headers the request must carry.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Headers []RouteHeaderMatch `json:"headers,omitempty"`
}

// OwnedRouteSpec describes the HTTPRoute the operator creates (named after the AgentDeployment) and owns.
type OwnedRouteSpec struct {
	// ParentRefs are the Gateways the route attaches to.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	ParentRefs []GatewayParentRef `json:"parentRefs"`
	// Hostnames the route serves; empty means every hostname of the listener, so on a shared Gateway set them.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Hostnames []string `json:"hostnames,omitempty"`
	// Matches select the requests routed to the agent; empty means every request on the hostnames.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Matches []RouteMatch `json:"matches,omitempty"`
}

// TrafficSpec says how traffic is split between the stable and canary Services: exactly one of route (the
// operator owns an HTTPRoute) and routeName (it edits only the backend weights of a route the user owns).
type TrafficSpec struct {
	// Route makes the operator create and own an HTTPRoute named after the AgentDeployment.
	// +optional
	Route *OwnedRouteSpec `json:"route,omitempty"`
	// RouteName names an HTTPRoute in the same namespace that the user owns. Its rules must have backendRefs to
	// the stable Service (<name>) and the canary Service (<name>-canary); the operator edits only their weights.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RouteName string `json:"routeName,omitempty"`
}

// CanaryMetricsSpec names the series and labels the canary analysis queries; empty fields take the defaults.
type CanaryMetricsSpec struct {
	// Requests is the request counter; http_requests_total by default.
	// +optional
	Requests string `json:"requests,omitempty"`
	// DurationBucket is the latency histogram's bucket series, in seconds; http_request_duration_seconds_bucket
	// by default.
	// +optional
	DurationBucket string `json:"durationBucket,omitempty"`
	// CodeLabel carries the HTTP status code; code by default.
	// +optional
	CodeLabel string `json:"codeLabel,omitempty"`
	// VariantLabel carries agentrax.io/variant as Prometheus stores it; agentrax_io_variant by default.
	// +optional
	VariantLabel string `json:"variantLabel,omitempty"`
	// AppLabel carries app.kubernetes.io/name; app_kubernetes_io_name by default.
	// +optional
	AppLabel string `json:"appLabel,omitempty"`
	// NamespaceLabel carries the pod's namespace; namespace by default.
	// +optional
	NamespaceLabel string `json:"namespaceLabel,omitempty"`
}
