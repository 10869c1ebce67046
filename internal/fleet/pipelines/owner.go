package pipelines

import (
	"crypto/sha256"
	"encoding/hex"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"google.golang.org/protobuf/types/known/structpb"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Keys of the ownership marker written into a pipeline's metadata Struct. The marker is how the operator tells a
// pipeline it created (or adopted) from one made in the Grafana UI or by Terraform: Fleet names are global to the
// stack, so a name match alone proves nothing.
const (
	MarkerManagedBy = "quartet.managedBy"
	MarkerCluster   = "quartet.cluster"
	MarkerNamespace = "quartet.namespace"
	MarkerName      = "quartet.name"
	MarkerUID       = "quartet.uid"
	// ManagedByValue is the value of MarkerManagedBy.
	ManagedByValue = "quartet-operator"
)

// Marker identifies the Pipeline CR that owns a Fleet pipeline.
type Marker struct {
	// Cluster identifies the Kubernetes cluster (the kube-system namespace UID unless configured).
	Cluster string
	// Namespace, Name and UID are the owning CR's.
	Namespace, Name, UID string
}

// MarkerFor is the marker of CR p in cluster.
func MarkerFor(cluster string, p *fleetv1alpha1.Pipeline) Marker {
	return Marker{Cluster: cluster, Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// Struct is the metadata Struct that carries the marker.
func (m Marker) Struct() *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		MarkerManagedBy: structpb.NewStringValue(ManagedByValue),
		MarkerCluster:   structpb.NewStringValue(m.Cluster),
		MarkerNamespace: structpb.NewStringValue(m.Namespace),
		MarkerName:      structpb.NewStringValue(m.Name),
		MarkerUID:       structpb.NewStringValue(m.UID),
	}}
}

// MarkerOf reads the marker from a pipeline's metadata; ok is false when there is none or it is incomplete (any
// field missing, empty or not a string), so a partial marker never counts as ownership.
func MarkerOf(p *pipelinev1.Pipeline) (Marker, bool) {
	f := p.GetMetadata().GetFields()
	str := func(k string) string {
		if v, ok := f[k].GetKind().(*structpb.Value_StringValue); ok {
			return v.StringValue
		}
		return ""
	}
	if str(MarkerManagedBy) != ManagedByValue {
		return Marker{}, false
	}
	m := Marker{Cluster: str(MarkerCluster), Namespace: str(MarkerNamespace), Name: str(MarkerName), UID: str(MarkerUID)}
	if m.Cluster == "" || m.Namespace == "" || m.Name == "" || m.UID == "" {
		return Marker{}, false
	}
	return m, true
}

// OwnedBy reports whether the Fleet pipeline carries exactly this marker: same cluster, same CR, same UID (a CR
// deleted and recreated under the same name is a different owner).
func OwnedBy(p *pipelinev1.Pipeline, m Marker) bool {
	got, ok := MarkerOf(p)
	return ok && got == m
}

// ContentsHash is the hex sha256 of a pipeline's contents, mirrored into status so a change is visible without
// copying the contents.
func ContentsHash(contents string) string {
	sum := sha256.Sum256([]byte(contents))
	return hex.EncodeToString(sum[:])
}
