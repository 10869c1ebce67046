package gnmic

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-cluster,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=clusters,verbs=create;update,versions=v1alpha1,name=vcluster-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-gnmicpipeline,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=gnmicpipelines,verbs=create;update,versions=v1alpha1,name=vgnmicpipeline-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-subscription,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=gnmicsubscriptions,verbs=create;update,versions=v1alpha1,name=vsubscription-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-output,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=gnmicoutputs,verbs=create;update,versions=v1alpha1,name=voutput-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-input,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=gnmicinputs,verbs=create;update,versions=v1alpha1,name=vinput-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-processor,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=gnmicprocessors,verbs=create;update,versions=v1alpha1,name=vprocessor-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-tunneltargetpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=gnmictunneltargetpolicies,verbs=create;update,versions=v1alpha1,name=vtunneltargetpolicy-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10

// specValidator validates one kind with a pure function from the API package, and optionally warns; deletes are
// never blocked.
type specValidator[T client.Object] struct {
	kind     string
	validate func(T) field.ErrorList
	warn     func(T) admission.Warnings
}

func (v specValidator[T]) warnings(obj T) admission.Warnings {
	if v.warn == nil {
		return nil
	}
	return v.warn(obj)
}

func (v specValidator[T]) check(obj T) error {
	if errs := v.validate(obj); len(errs) > 0 {
		return apierrors.NewInvalid(gnmicv1alpha1.GroupVersion.WithKind(v.kind).GroupKind(), obj.GetName(), errs)
	}
	return nil
}

func (v specValidator[T]) ValidateCreate(_ context.Context, obj T) (admission.Warnings, error) {
	return v.warnings(obj), v.check(obj)
}

func (v specValidator[T]) ValidateUpdate(_ context.Context, _, obj T) (admission.Warnings, error) {
	return v.warnings(obj), v.check(obj)
}

func (v specValidator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func setup[T client.Object](mgr ctrl.Manager, obj T, kind string, validate func(T) field.ErrorList) error {
	return setupWarning(mgr, obj, specValidator[T]{kind: kind, validate: validate})
}

func setupWarning[T client.Object](mgr ctrl.Manager, obj T, v specValidator[T]) error {
	return ctrl.NewWebhookManagedBy(mgr, obj).WithValidator(v).Complete()
}

// SetupClusterWebhook registers the Cluster validating webhook (image, replicas, ports, TLS issuers, and the
// requester's right to read the Secrets and ConfigMaps its env names).
func SetupClusterWebhook(mgr ctrl.Manager, trust *Trust) error {
	return ctrl.NewWebhookManagedBy(mgr, &gnmicv1alpha1.Cluster{}).WithValidator(clusterValidator{
		spec: specValidator[*gnmicv1alpha1.Cluster]{kind: "Cluster", validate: gnmicv1alpha1.ValidateCluster}, trust: trust,
	}).Complete()
}

// clusterValidator is the Cluster's spec validation plus the requester check of its env references.
type clusterValidator struct {
	spec  specValidator[*gnmicv1alpha1.Cluster]
	trust *Trust
}

func (v clusterValidator) check(ctx context.Context, c *gnmicv1alpha1.Cluster) error {
	if err := v.spec.check(c); err != nil {
		return err
	}
	return v.trust.refuse(ctx, "clusters", c.Name, clusterUses(c))
}

func (v clusterValidator) ValidateCreate(ctx context.Context, c *gnmicv1alpha1.Cluster) (admission.Warnings, error) {
	return nil, v.check(ctx, c)
}

func (v clusterValidator) ValidateUpdate(ctx context.Context, _, c *gnmicv1alpha1.Cluster) (admission.Warnings, error) {
	return nil, v.check(ctx, c)
}

func (clusterValidator) ValidateDelete(context.Context, *gnmicv1alpha1.Cluster) (admission.Warnings, error) {
	return nil, nil
}

// SetupPipelineWebhook registers the Pipeline validating webhook (refs and selectors).
func SetupPipelineWebhook(mgr ctrl.Manager) error {
	return setup(mgr, &gnmicv1alpha1.GnmicPipeline{}, "GnmicPipeline", gnmicv1alpha1.ValidatePipeline)
}

// SetupSubscriptionWebhook registers the Subscription validating webhook (mode, paths, intervals).
func SetupSubscriptionWebhook(mgr ctrl.Manager) error {
	return setup(mgr, &gnmicv1alpha1.Subscription{}, "Subscription", gnmicv1alpha1.ValidateSubscription)
}

// SetupOutputWebhook registers the Output validating webhook (type and address resolution rules; warnings for
// config keys the output plugin lacks).
func SetupOutputWebhook(mgr ctrl.Manager) error {
	return setupWarning(mgr, &gnmicv1alpha1.Output{}, outputValidator)
}

// SetupInputWebhook registers the Input validating webhook.
func SetupInputWebhook(mgr ctrl.Manager) error {
	return setup(mgr, &gnmicv1alpha1.Input{}, "Input", gnmicv1alpha1.ValidateInput)
}

// SetupProcessorWebhook registers the Processor validating webhook (type; warnings for config keys the
// processor lacks).
func SetupProcessorWebhook(mgr ctrl.Manager) error {
	return setupWarning(mgr, &gnmicv1alpha1.Processor{}, processorValidator)
}

// SetupTunnelTargetPolicyWebhook registers the TunnelTargetPolicy validating webhook (match regexes).
func SetupTunnelTargetPolicyWebhook(mgr ctrl.Manager) error {
	return setup(mgr, &gnmicv1alpha1.TunnelTargetPolicy{}, "TunnelTargetPolicy", gnmicv1alpha1.ValidateTunnelTargetPolicy)
}
