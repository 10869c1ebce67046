package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OutputType is a gNMIc output type.
// +kubebuilder:validation:Enum=file;kafka;prometheus;prometheus_write;nats;jetstream;influxdb;tcp;udp
type OutputType string

// The output types.
const (
	OutputFile            OutputType = "file"
	OutputKafka           OutputType = "kafka"
	OutputPrometheus      OutputType = "prometheus"
	OutputPrometheusWrite OutputType = "prometheus_write"
	OutputNATS            OutputType = "nats"
	OutputJetStream       OutputType = "jetstream"
	OutputInfluxDB        OutputType = "influxdb"
	OutputTCP             OutputType = "tcp"
	OutputUDP             OutputType = "udp"
)

// OutputTypes lists every output type.
var OutputTypes = []OutputType{OutputFile, OutputKafka, OutputPrometheus, OutputPrometheusWrite, OutputNATS,
	OutputJetStream, OutputInfluxDB, OutputTCP, OutputUDP}

// OutputAddressKey returns the gNMIc config key a resolved service address is written to for an output type, the
// URL scheme it gets ("" for a bare host:port) and whether the type supports service resolution at all.
func OutputAddressKey(t OutputType) (key, scheme string, ok bool) {
	switch t {
	case OutputNATS, OutputJetStream, OutputKafka:
		return "address", "", true
	case OutputPrometheusWrite, OutputInfluxDB:
		return "url", "http", true
	}
	return "", "", false
}

// OutputServiceRef points an output at a Service (or a literal URL).
type OutputServiceRef struct {
	// Name of the Service; with port, resolves to <name>.<namespace>.svc:<port>.
	// +optional
	Name string `json:"name,omitempty"`
	// Namespace of the Service; the Output's namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Port of the Service, a number or a port name.
	// +optional
	Port string `json:"port,omitempty"`
	// URL is used as is instead of name/port.
	// +optional
	URL string `json:"url,omitempty"`
}

// OutputServiceSelector picks the first Service (by name) matching the labels.
type OutputServiceSelector struct {
	// MatchLabels the Service must carry.
	// +required
	// +kubebuilder:validation:MinProperties=1
	MatchLabels map[string]string `json:"matchLabels"`
	// Namespace to look in; the Output's namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Port of the Service, a number or a port name.
	// +required
	// +kubebuilder:validation:MinLength=1
	Port string `json:"port"`
}

// OutputSpec is one gNMIc output.
type OutputSpec struct {
	// Type of the output.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Type"
	Type OutputType `json:"type"`
	// Config is the gNMIc output configuration for the type (schemaless; gNMIc's keys, e.g. listen, topic).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Config"
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
	// Service shapes the Service the operator creates for a prometheus output (prometheus only).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Service"
	Service *ServiceTemplate `json:"service,omitempty"`
	// ServiceRef resolves the output's address from a Service (nats, jetstream, kafka, prometheus_write,
	// influxdb only).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Service Reference"
	ServiceRef *OutputServiceRef `json:"serviceRef,omitempty"`
	// ServiceSelector resolves the output's address from a Service chosen by labels (same types as serviceRef;
	// exclusive with it).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Service Selector"
	ServiceSelector *OutputServiceSelector `json:"serviceSelector,omitempty"`
}

// CollectorResourceStatus is the observed state of Subscriptions, Outputs, Inputs, Processors and
// TunnelTargetPolicies: whether the spec is valid and which GnmicPipelines use the object.
type CollectorResourceStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Pipelines names the GnmicPipelines of this namespace that reference this object, by name or by a selector
	// matching its labels (sorted).
	// +optional
	// +listType=set
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pipelines"
	Pipelines []string `json:"pipelines,omitempty"`
	// PipelinesCount is how many GnmicPipelines reference this object.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pipelines Count"
	PipelinesCount int32 `json:"pipelinesCount"`
	// Conditions: Ready (Valid, or Invalid naming the offending fields).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Conditions and reasons of the collector-configuration kinds (Subscription, Output, Input, Processor,
// TunnelTargetPolicy).
const (
	// CollectorResourceConditionReady is True when the spec passes validation.
	CollectorResourceConditionReady = "Ready"
	ReasonValid                     = "Valid"
	ReasonInvalid                   = "Invalid"
)

// Output is a destination for collected telemetry (Prometheus, Kafka, NATS, InfluxDB, …).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gnmicoutputs,singular=gnmicoutput,shortName=gnout,categories={gnmic}
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pipelines",type=integer,JSONPath=`.status.pipelinesCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMIc Output",resources={{Service,v1,""}}
type Output struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec OutputSpec `json:"spec"`
	// +optional
	Status CollectorResourceStatus `json:"status,omitempty"`
}

// OutputList is a list of Outputs.
// +kubebuilder:object:root=true
type OutputList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Output `json:"items"`
}

// InputType is a gNMIc input type.
// +kubebuilder:validation:Enum=kafka;nats;jetstream
type InputType string

// InputSpec is one gNMIc input: telemetry read from a bus and sent to the Pipeline's outputs.
type InputSpec struct {
	// Type of the input.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Type"
	Type InputType `json:"type"`
	// Config is the gNMIc input configuration (schemaless; gNMIc's keys, e.g. address, subject, topics).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Config"
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
}

// Input reads telemetry from Kafka, NATS or JetStream.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gnmicinputs,singular=gnmicinput,shortName=gnin,categories={gnmic}
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pipelines",type=integer,JSONPath=`.status.pipelinesCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMIc Input",resources={{Cluster,v1alpha1,""}}
type Input struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec InputSpec `json:"spec"`
	// +optional
	Status CollectorResourceStatus `json:"status,omitempty"`
}

// InputList is a list of Inputs.
// +kubebuilder:object:root=true
type InputList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Input `json:"items"`
}

// ProcessorSpec is one gNMIc event processor.
type ProcessorSpec struct {
	// Type is the gNMIc event processor type, e.g. event-strings, event-drop, event-add-tag.
	// +required
	// +kubebuilder:validation:Pattern=`^event-[a-z0-9-]+$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Type"
	Type string `json:"type"`
	// Config is the processor's gNMIc configuration (schemaless).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Config"
	Config *apiextensionsv1.JSON `json:"config,omitempty"`
}

// Processor transforms events on their way to outputs or from inputs.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gnmicprocessors,singular=gnmicprocessor,shortName=gnproc,categories={gnmic}
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pipelines",type=integer,JSONPath=`.status.pipelinesCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMIc Processor",resources={{Cluster,v1alpha1,""}}
type Processor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ProcessorSpec `json:"spec"`
	// +optional
	Status CollectorResourceStatus `json:"status,omitempty"`
}

// ProcessorList is a list of Processors.
// +kubebuilder:object:root=true
type ProcessorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Processor `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Output{}, &OutputList{}, &Input{}, &InputList{}, &Processor{}, &ProcessorList{})
}
