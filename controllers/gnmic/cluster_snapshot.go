package gnmic

import (
	"context"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

var (
	applyTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gnmic_operator_cluster_apply_total",
		Help: "POST /api/v1/config/apply requests sent to collector pods, by result (success|failure).",
	}, []string{"namespace", "name", "result"})
	clusterTargets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gnmic_operator_cluster_targets",
		Help: "Targets of a Cluster by state (assigned|unassigned|not_collected: placed on a pod that is unready or failed its apply, or fitting nowhere).",
	}, []string{"namespace", "name", "state"})
)

func init() {
	metrics.Registry.MustRegister(applyTotal, clusterTargets)
}

// The results of gnmic_operator_cluster_apply_total.
const (
	applySuccess = "success"
	applyFailure = "failure"
)

// forgetClusterMetrics drops the series of a deleted Cluster.
func forgetClusterMetrics(cluster ktypes.NamespacedName) {
	labels := prometheus.Labels{"namespace": cluster.Namespace, "name": cluster.Name}
	applyTotal.DeletePartialMatch(labels)
	clusterTargets.DeletePartialMatch(labels)
}

// recordClusterGauges publishes the Cluster's target counts and starts both apply results at zero, so the
// collectors-not-applied alert's increase() sees the first failed push of a Cluster.
func recordClusterGauges(c *gnmicv1alpha1.Cluster) {
	applyTotal.WithLabelValues(c.Namespace, c.Name, applySuccess)
	applyTotal.WithLabelValues(c.Namespace, c.Name, applyFailure)
	clusterTargets.WithLabelValues(c.Namespace, c.Name, "assigned").Set(float64(c.Status.TargetsCount))
	clusterTargets.WithLabelValues(c.Namespace, c.Name, "unassigned").Set(float64(c.Status.UnassignedTargets))
	clusterTargets.WithLabelValues(c.Namespace, c.Name, "not_collected").Set(float64(c.Status.TargetsNotCollected))
}

// snapshot reads everything the plan needs from the Cluster's namespace.
func (r *ClusterReconciler) snapshot(ctx context.Context, c *gnmicv1alpha1.Cluster) (plan.Snapshot, error) {
	ns := client.InNamespace(c.Namespace)
	s := plan.Snapshot{CollectorImage: c.Spec.Image, ReservedPorts: []int32{c.RestPort()}, ClientCert: clientCertFiles(c),
		OutputInstances: c.Status.OutputInstances}
	if c.Spec.API != nil && c.Spec.API.GNMIPort != 0 {
		s.ReservedPorts = append(s.ReservedPorts, c.Spec.API.GNMIPort)
	}
	if c.Spec.GRPCTunnel != nil {
		s.ReservedPorts = append(s.ReservedPorts, c.Spec.GRPCTunnel.Port)
	}
	pipelines := &gnmicv1alpha1.GnmicPipelineList{}
	if err := r.List(ctx, pipelines, ns, client.MatchingFields{pipelineClusterIx: c.Name}); err != nil {
		return s, err
	}
	s.Pipelines = pipelines.Items
	profiles, err := readNamespace(ctx, r.Client, c.Namespace, &s)
	if err != nil {
		return s, err
	}
	sort.Slice(s.Targets, func(i, j int) bool { return s.Targets[i].Name < s.Targets[j].Name })
	s.Profiles = map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile{}
	s.Credentials = map[ktypes.NamespacedName]map[string][]byte{}
	for i := range profiles {
		p := &profiles[i]
		s.Profiles[client.ObjectKeyFromObject(p)] = p
		if ref := p.Spec.CredentialsRef; ref != nil {
			if !apiTLSEnabled(c) {
				// Plain HTTP to the collectors: the credentials would cross the pod network in clear.
				s.CredentialsWithheld = append(s.CredentialsWithheld, p.Name)
				continue
			}
			key := ktypes.NamespacedName{Namespace: p.Namespace, Name: ref.Name}
			if _, done := s.Credentials[key]; done {
				continue
			}
			secret := &corev1.Secret{}
			if err := r.APIReader.Get(ctx, key, secret); err != nil {
				if !apierrors.IsNotFound(err) {
					return s, err
				}
				// Held back rather than pushed without credentials (see heldBackForCredentials).
				if s.CredentialsMissing == nil {
					s.CredentialsMissing = map[ktypes.NamespacedName]string{}
				}
				s.CredentialsMissing[client.ObjectKeyFromObject(p)] = "credentials Secret/" + ref.Name + " not found"
				continue
			}
			s.Credentials[key] = secret.Data
		}
	}
	s.OutputAddresses = r.resolveOutputAddresses(ctx, s.Outputs)
	ports, err := r.prometheusPorts(ctx, c)
	if err != nil {
		return s, err
	}
	s.PrometheusPorts = ports
	return s, nil
}

// readNamespace lists every kind a plan selects from in one namespace into s, and returns the TargetProfiles.
func readNamespace(ctx context.Context, c client.Client, namespace string, s *plan.Snapshot) ([]gnmicv1alpha1.TargetProfile, error) {
	ns := client.InNamespace(namespace)
	targets, subs, outs := &gnmicv1alpha1.TargetList{}, &gnmicv1alpha1.SubscriptionList{}, &gnmicv1alpha1.OutputList{}
	ins, procs, ttps := &gnmicv1alpha1.InputList{}, &gnmicv1alpha1.ProcessorList{}, &gnmicv1alpha1.TunnelTargetPolicyList{}
	profiles := &gnmicv1alpha1.TargetProfileList{}
	for _, l := range []client.ObjectList{targets, subs, outs, ins, procs, ttps, profiles} {
		if err := c.List(ctx, l, ns); err != nil {
			return nil, err
		}
	}
	s.Targets, s.Subscriptions, s.Outputs, s.Inputs = targets.Items, subs.Items, outs.Items, ins.Items
	s.Processors, s.TunnelTargetPolicies = procs.Items, ttps.Items
	return profiles.Items, nil
}
