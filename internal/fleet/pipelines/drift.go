package pipelines

import (
	"slices"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
)

// Drift lists the fields in which the pipeline Fleet holds differs from the one the CR would write (desired, from
// ToProto), by their spec names; nil when they agree. A nil remote (the pipeline is gone) is the one field
// "deleted". The ownership marker is not compared: a pipeline found by the ID the CR wrote is the CR's.
func Drift(desired, remote *pipelinev1.Pipeline) []string {
	if remote == nil {
		return []string{"deleted"}
	}
	var fields []string
	if desired.GetName() != remote.GetName() {
		fields = append(fields, "name")
	}
	if desired.GetContents() != remote.GetContents() {
		fields = append(fields, "contents")
	}
	if !slices.Equal(desired.GetMatchers(), remote.GetMatchers()) {
		fields = append(fields, "matchers")
	}
	if (desired.Enabled == nil || desired.GetEnabled()) != (remote.Enabled == nil || remote.GetEnabled()) {
		fields = append(fields, "enabled")
	}
	if configType(desired) != configType(remote) {
		fields = append(fields, "configType")
	}
	if desired.GetSource().GetType() != remote.GetSource().GetType() || desired.GetSource().GetNamespace() != remote.GetSource().GetNamespace() {
		fields = append(fields, "source")
	}
	return fields
}

// configType treats unspecified as Alloy, as Fleet does.
func configType(p *pipelinev1.Pipeline) pipelinev1.ConfigType {
	if p.GetConfigType() == pipelinev1.ConfigType_CONFIG_TYPE_UNSPECIFIED {
		return pipelinev1.ConfigType_CONFIG_TYPE_ALLOY
	}
	return p.GetConfigType()
}
