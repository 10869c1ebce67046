package v1alpha1

// MaxSelectorCollectorIDs bounds PolicySelector.collectorIDs.
const MaxSelectorCollectorIDs = 1000

// PolicySelector selects collectors: every matcher must match (AND), or the collector's ID is listed (OR). An
// empty selector matches nothing.
type PolicySelector struct {
	// Matchers in Prometheus Alertmanager syntax (env="prod", team=~"a|b"), evaluated against the collector's
	// local attributes, the remote attributes of its Collector spec and the synthetic collector.id. Regexes are
	// fully anchored.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=200
	Matchers []string `json:"matchers,omitempty"`
	// CollectorIDs are collector IDs selected regardless of the matchers.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	CollectorIDs []string `json:"collectorIDs,omitempty"`
}

// IsEmpty reports whether the selector selects nothing because it names nothing.
func (s *PolicySelector) IsEmpty() bool { return len(s.Matchers) == 0 && len(s.CollectorIDs) == 0 }
