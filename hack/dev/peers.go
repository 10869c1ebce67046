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

// help is what `make dev` prints once the samples converged: how to reach the control plane and every local peer.
func (s *devStack) help() string {
	realNode := ""
	if s.realNode != nil {
		realNode = s.realNode.Help()
	}
	return s.gitopsInfo + collectorsHelp(s.collectors) + realNode + fmt.Sprintf(`
make dev: the operator is running with every controller and webhook (%d samples applied).

  export KUBECONFIG=%s
  bin/k8s/kubectl get targets,targetprofiles,targetsources -A
  bin/k8s/kubectl get tenantquotas,agentdeployments,deployments,services,hpa,podmonitors
  bin/k8s/kubectl get tenants,platforms -A   # gitops: the team-demo Tenant and the Platform's stages
  bin/k8s/kubectl get nodes,pods -A          # simulated nodes (kwok) and the pods the real controllers made

Try a bad object (the webhook rejects it and names the field):

  bin/k8s/kubectl apply -f - <<'EOF'
  apiVersion: operator.gnmic.dev/v1alpha1
  kind: Target
  metadata: {name: bad}
  spec: {address: router1, profile: default}
  EOF

%s
%s
Ctrl-C stops everything.
`, s.applied, s.kubeconfig, fleetHelp(s.fleet), s.registry.help())
}
