package agentrax

import (
	"context"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// containerName is the agent container's name in the pod template.
const containerName = "agent"

// portName names the agent's HTTP port on the container, the Service and the PodMonitor.
const portName = "http"

// External metric names served by the Prometheus Adapter rules in config/components/agentrax-prometheus-adapter.
var externalMetrics = map[agentraxv1alpha1.ScalingMetric]string{
	agentraxv1alpha1.MetricQueueDepth:     "agentrax_queue_depth",
	agentraxv1alpha1.MetricGPUUtilization: "agentrax_gpu_utilization",
}

// selectorLabels select an agent's pods of one variant.
func selectorLabels(ad *agentraxv1alpha1.AgentDeployment, variant string) map[string]string {
	return map[string]string{agentraxv1alpha1.LabelName: ad.Name, agentraxv1alpha1.LabelVariant: variant}
}

// childLabels go on every stable child and pod: the selector labels plus agentrax.io/agent, which the tenant
// NetworkPolicies select on. (The canary's children are labelled variant=canary: canaryLabels.)
func childLabels(ad *agentraxv1alpha1.AgentDeployment) map[string]string {
	l := selectorLabels(ad, agentraxv1alpha1.VariantStable)
	l[agentraxv1alpha1.LabelAgent] = "true"
	l["app.kubernetes.io/managed-by"] = "quartet-operator"
	return l
}

func mergeLabels(existing, owned map[string]string) map[string]string {
	if existing == nil {
		existing = map[string]string{}
	}
	maps.Copy(existing, owned)
	return existing
}

func agentContainer(pod *corev1.PodSpec) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == containerName {
			return &pod.Containers[i]
		}
	}
	return nil
}

// reconcileDeployment writes the stable Deployment. spec.replicas is set only when the Deployment is created:
// after that the HPA owns it, and writing it back would fight the autoscaler.
//
// The stable Deployment carries no owner reference to the agent: the garbage collector would delete it, and
// with it the pods behind the registered endpoint, the moment the agent is deleted with Foreground propagation
// (an owner's finalizer does not hold its dependents), while the agent is still in the MCP registry. finalize
// deletes it once the agent is deregistered; until then it is found by name and by its labels, and a reference
// written by an older operator is removed here.
func (r *AgentDeploymentReconciler) reconcileDeployment(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, obs *observed) error {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		if owner := metav1.GetControllerOf(dep); owner != nil && owner.UID != ad.UID {
			return fmt.Errorf("the Deployment %s/%s is controlled by %s %s, not by this agent", dep.Namespace, dep.Name,
				owner.Kind, owner.Name)
		}
		dep.OwnerReferences = slices.DeleteFunc(dep.OwnerReferences, func(o metav1.OwnerReference) bool {
			return o.UID == ad.UID
		})
		labels := childLabels(ad)
		dep.Labels = mergeLabels(dep.Labels, labels)
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Replicas = ptr.To(ad.Spec.Replicas.Min)
			dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(ad, agentraxv1alpha1.VariantStable)}
		}
		dep.Spec.Template.Labels = mergeLabels(dep.Spec.Template.Labels, labels)
		writeAgentPod(&dep.Spec.Template.Spec, ad, stableImage(ad))
		return nil
	})
	obs.deployment = dep
	return err
}

// deleteStableDeployment deletes the agent's stable Deployment (and so its pods) once the agent is deregistered,
// unless the agent was deleted with Orphan propagation. Only a Deployment carrying the agent's labels is deleted.
func (r *AgentDeploymentReconciler) deleteStableDeployment(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	if controllerutil.ContainsFinalizer(ad, metav1.FinalizerOrphanDependents) {
		return nil
	}
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ad.Namespace, Name: ad.Name}, dep); err != nil {
		return client.IgnoreNotFound(err)
	}
	if dep.Labels[agentraxv1alpha1.LabelName] != ad.Name || dep.Labels[agentraxv1alpha1.LabelAgent] != "true" ||
		metav1.GetControllerOf(dep) != nil || dep.DeletionTimestamp != nil {
		return nil
	}
	return client.IgnoreNotFound(r.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &dep.UID}))
}

// agentOfDeployment maps an agent's Deployment (stable or canary) to its agent by its labels: the stable one has
// no owner reference to map by.
func agentOfDeployment(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[agentraxv1alpha1.LabelAgent] != "true" || l[agentraxv1alpha1.LabelName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[agentraxv1alpha1.LabelName]}}}
}

// writeAgentPod sets what the operator owns in an agent pod template (stable or canary): the agent container and a
// security context the "restricted" Pod Security level admits. No runAsUser: OpenShift assigns one from the
// namespace's range, and agent images are expected to run as a non-root user (as the Pod Security docs require).
func writeAgentPod(pod *corev1.PodSpec, ad *agentraxv1alpha1.AgentDeployment, image string) {
	c := agentContainer(pod)
	if c == nil {
		pod.Containers = append(pod.Containers, corev1.Container{Name: containerName})
		c = &pod.Containers[len(pod.Containers)-1]
	}
	c.Image = image
	c.Args = ad.Spec.Args
	c.Env = normalizedEnv(ad.Spec.Env)
	c.Resources = ad.Spec.Resources
	c.Ports = []corev1.ContainerPort{{Name: portName, ContainerPort: ad.Spec.Port, Protocol: corev1.ProtocolTCP}}
	c.ReadinessProbe = normalizedProbe(ad.Spec.ReadinessProbe)
	c.StartupProbe = normalizedProbe(ad.Spec.StartupProbe)
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	pod.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	// Agents run under the namespace's default ServiceAccount, which the operator did not create: without its
	// token, so an AgentDeployment cannot lend an agent image whatever rights that account was granted (the
	// escalation guard refuses any other pod template from the operator).
	pod.AutomountServiceAccountToken = ptr.To(false)
}

// normalizedProbe fills in what the API server defaults in a probe, so an unchanged spec compares equal and the
// Deployment is not rewritten on every reconcile.
func normalizedProbe(p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	out := p.DeepCopy()
	def := func(v *int32, d int32) {
		if *v == 0 {
			*v = d
		}
	}
	def(&out.TimeoutSeconds, 1)
	def(&out.PeriodSeconds, 10)
	def(&out.SuccessThreshold, 1)
	def(&out.FailureThreshold, 3)
	if h := out.HTTPGet; h != nil && h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
	return out
}

// normalizedEnv fills in what the API server defaults in a pod template, so an unchanged spec compares equal.
func normalizedEnv(env []corev1.EnvVar) []corev1.EnvVar {
	if len(env) == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		e.DeepCopyInto(&out[i])
		if f := out[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	return out
}

// reconcileService writes the stable Service in front of the stable pods. The Service carries the agent's
// finalizer: whatever deletes it — the garbage collector under any propagation policy, or a user — it stays until
// the agent is deregistered from the MCP registry (finalize), so no client is sent to an address that is gone.
func (r *AgentDeploymentReconciler) reconcileService(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, _ *observed) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}}
	if err := r.Get(ctx, client.ObjectKeyFromObject(svc), svc); err == nil && svc.DeletionTimestamp != nil {
		// Deleted out of band while the agent lives: let it go; the next reconcile (its deletion is watched)
		// creates a new one.
		return releaseDeregistrationHold(ctx, r.Client, svc)
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		controllerutil.AddFinalizer(svc, agentraxv1alpha1.Finalizer)
		svc.Labels = mergeLabels(svc.Labels, childLabels(ad))
		svc.Spec.Selector = selectorLabels(ad, agentraxv1alpha1.VariantStable)
		svc.Spec.Ports = []corev1.ServicePort{{
			Name: portName, Port: ad.Spec.Port, TargetPort: intstr.FromString(portName), Protocol: corev1.ProtocolTCP,
		}}
		return controllerutil.SetControllerReference(ad, svc, r.Scheme())
	})
	return err
}

// reconcilePodMonitor writes a PodMonitor that scrapes the agent's pods of both variants, keeping the variant as
// a target label (agentrax_io_variant), so canary analysis sees canary traffic. Skipped without the CRD.
func (r *AgentDeploymentReconciler) reconcilePodMonitor(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, _ *observed) error {
	if !r.PodMonitors {
		return nil
	}
	pm := &monitoringv1.PodMonitor{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, pm, func() error {
		pm.Labels = mergeLabels(pm.Labels, childLabels(ad))
		pm.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{
			agentraxv1alpha1.LabelName: ad.Name, agentraxv1alpha1.LabelAgent: "true"}}
		pm.Spec.PodTargetLabels = []string{agentraxv1alpha1.LabelVariant, agentraxv1alpha1.LabelName}
		pm.Spec.PodMetricsEndpoints = []monitoringv1.PodMetricsEndpoint{{Port: ptr.To(portName), Path: "/metrics"}}
		return controllerutil.SetControllerReference(ad, pm, r.Scheme())
	})
	return err
}

// DefaultHPABehavior is the scaling behavior every AgentDeployment's autoscaler gets, the seed's: scale up
// within 60 s by at most 4 pods a minute, down after 5 minutes by at most 1 pod a minute. A variable only so that
// a test can check the autoscaler's arithmetic without waiting out the windows.
var DefaultHPABehavior = autoscalingv2.HorizontalPodAutoscalerBehavior{
	ScaleUp: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](60),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 60}},
	},
	ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](300),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}},
	},
}

// desiredHPA is the autoscaler spec: one External metric with an AverageValue target of spec.replicas.target.
// For that pairing the HPA controller computes desired replicas = ceil(metric ÷ target) whatever the current
// replica count, so the adapter rule of every metric must return the agent's total (sum over its pods), never
// an average: then desired = ceil(total load ÷ per-pod target). (An average would ask for ceil(90 ÷ 70) = 2 pods
// for ten pods at 90 % GPU against a 70 % target.) Checked against the real HPA controller in test/hpareal.
func desiredHPA(ad *agentraxv1alpha1.AgentDeployment, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscalerSpec {
	return &autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: ad.Name},
		MinReplicas:    ptr.To(ad.Spec.Replicas.Min),
		MaxReplicas:    maxReplicas,
		Metrics: []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{
					Name: externalMetrics[ad.Spec.Replicas.Metric],
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
						"namespace": ad.Namespace, "app_kubernetes_io_name": ad.Name}},
				},
				Target: autoscalingv2.MetricTarget{
					Type:         autoscalingv2.AverageValueMetricType,
					AverageValue: resource.NewQuantity(int64(ad.Spec.Replicas.Target), resource.DecimalSI),
				},
			},
		}},
		Behavior: DefaultHPABehavior.DeepCopy(),
	}
}

// releaseDeregistrationHold removes the agent's finalizer from its Service.
func releaseDeregistrationHold(ctx context.Context, c client.Client, svc *corev1.Service) error {
	if !controllerutil.ContainsFinalizer(svc, agentraxv1alpha1.Finalizer) {
		return nil
	}
	// The finalizer list is replaced whole by a merge patch: the resourceVersion precondition keeps a stale copy
	// from dropping a finalizer the garbage collector added meanwhile (foregroundDeletion); a conflict is retried.
	patch := client.MergeFromWithOptions(svc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(svc, agentraxv1alpha1.Finalizer)
	return client.IgnoreNotFound(c.Patch(ctx, svc, patch))
}
