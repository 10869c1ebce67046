package main

import (
	"fmt"
	"strings"

	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
)

func fleetHelp(f *devstack.Fleet) string {
	url := f.Server.URL()
	user, pass := devstack.FleetUser, devstack.FleetPassword
	return fmt.Sprintf(`The fleet samples sync to a local Fleet Management API at %s (user %s, password %s):
  bin/k8s/kubectl get pipelines.fleetmanagement.grafana.com,collectors,remoteattributepolicies,externalattributesyncs -A
  curl --cacert %s -u %s:%s -H 'Content-Type: application/json' -d '{}' \
    %s/pipeline.v1.PipelineService/ListPipelines
  curl --cacert %s -u %s:%s -H 'Content-Type: application/json' -d '{"id":"edge-collector-1"}' \
    %s/collector.v1.CollectorService/GetCollector
The ExternalAttributeSync default/dev-file-source reads %s (the file is .dev/attribute-source/collectors.json);
the RemoteAttributePolicy sample adds tier=gold to the same collector.
`, url, user, pass, f.CAFile, user, pass, url, f.CAFile, user, pass, url, f.SourceURL)
}

func collectorsHelp(d *devstack.Collectors) string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("Local gNMIc collectors (test servers) behind the sample Cluster's simulated pods (QUARTET_DEV_DIAL_MAP):\n")
	for _, entry := range strings.Split(d.DialEntries(), ",") {
		from, to, _ := strings.Cut(entry, "=")
		fmt.Fprintf(&b, "  %s → %s\n", from, to)
	}
	return b.String()
}
