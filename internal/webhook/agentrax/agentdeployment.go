// Package agentrax holds the admission webhooks of the agentrax.io group: AgentDeployment defaulting, validation
// and quota admission.
package agentrax

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// +kubebuilder:webhook:path=/mutate-agentrax-io-v1alpha1-agentdeployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=agentrax.io,resources=agentdeployments,verbs=create;update,versions=v1alpha1,name=magentdeployment-v1alpha1.agentrax.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-agentrax-io-v1alpha1-agentdeployment,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=agentrax.io,resources=agentdeployments,verbs=create;update,versions=v1alpha1,name=vagentdeployment-v1alpha1.agentrax.io,admissionReviewVersions=v1,timeoutSeconds=10

// +kubebuilder:rbac:groups=agentrax.io,resources=tenantquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrax.io,resources=tenantquotas/status,verbs=get;update;patch

// Defaulter sets spec.port to 8080, spec.rollout.strategy to Recreate and
// spec.rollout.rollback.onInsufficientSamples to Hold when they are not set.
type Defaulter struct{}

var _ admission.Defaulter[*agentraxv1alpha1.AgentDeployment] = Defaulter{}

// Default implements admission.Defaulter.
func (Defaulter) Default(_ context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	SetDefaults(ad)
	return nil
}

// SetDefaults applies the AgentDeployment defaults in place.
func SetDefaults(ad *agentraxv1alpha1.AgentDeployment) {
	if ad.Spec.Port == 0 {
		ad.Spec.Port = agentraxv1alpha1.DefaultPort
	}
	if ad.Spec.Rollout == nil {
		ad.Spec.Rollout = &agentraxv1alpha1.RolloutSpec{}
	}
	if ad.Spec.Rollout.Strategy == "" {
		ad.Spec.Rollout.Strategy = agentraxv1alpha1.StrategyRecreate
	}
	if ad.Spec.Rollout.ProgressDeadline == nil {
		ad.Spec.Rollout.ProgressDeadline = &metav1.Duration{Duration: agentraxv1alpha1.DefaultProgressDeadline}
	}
	if rb := ad.Spec.Rollout.Rollback; rb != nil && rb.OnInsufficientSamples == "" {
		rb.OnInsufficientSamples = agentraxv1alpha1.InsufficientSamplesHold
	}
}

// Validator checks AgentDeployments and admits them against their TenantQuota.
type Validator struct {
	Quota *QuotaAdmission
	// Requester checks, through the shared internal/requester helper, that the user may read every Secret the
	// agent's env names: the agent's pods read them with the namespace's rights, on the requester's behalf. Nil
	// allows every reference (tests of admission alone).
	Requester *requester.Checker
}

var _ admission.Validator[*agentraxv1alpha1.AgentDeployment] = Validator{}

// SetupAgentDeploymentWebhook registers the AgentDeployment defaulting and validating webhooks. GPUs are counted
// as the gpu extended resource (quota.DefaultGPUResourceName when empty).
func SetupAgentDeploymentWebhook(mgr ctrl.Manager, gpu corev1.ResourceName) error {
	if gpu == "" {
		gpu = quota.DefaultGPUResourceName
	}
	c, err := QuotaClient(mgr)
	if err != nil {
		return err
	}
	q := &QuotaAdmission{Reader: c, Writer: c, GPUResource: gpu}
	if err := q.ObserveInformer(mgr.GetCache()); err != nil {
		return err
	}
	// Registered by hand rather than through the webhook builder so that each handler is timed
	// (agentrax_admission_duration_seconds); the paths are the builder's, which the markers above name.
	mutating := admission.WithDefaulter[*agentraxv1alpha1.AgentDeployment](mgr.GetScheme(), Defaulter{})
	mutating.Handler = timedHandler{webhook: "mutating", next: mutating.Handler}
	validating := admission.WithValidator[*agentraxv1alpha1.AgentDeployment](mgr.GetScheme(), Validator{Quota: q,
		Requester: &requester.Checker{Reviews: mgr.GetClient()}})
	validating.Handler = timedHandler{webhook: "validating", next: validating.Handler}
	server := mgr.GetWebhookServer()
	server.Register(MutatingPath, mutating.WithRecoverPanic(true))
	server.Register(ValidatingPath, validating.WithRecoverPanic(true))
	return nil
}

// QuotaClient is a client as quota admission reads and writes TenantQuotas with. The API server waits for
// admission while admission waits for these calls: they get a client of their own, without the client-side
// rate limit the controllers share, so that busy controllers never queue an admission behind their requests
// (the API server's priority and fairness still applies). The benchmark writes its bare compare-and-swap
// baseline through one too, so that both sides use the same client settings.
func QuotaClient(mgr ctrl.Manager) (client.Client, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the quota admission client: %w", err)
	}
	return c, nil
}

// The AgentDeployment webhook paths, as the kubebuilder markers above declare them.
const (
	MutatingPath   = "/mutate-agentrax-io-v1alpha1-agentdeployment"
	ValidatingPath = "/validate-agentrax-io-v1alpha1-agentdeployment"
)

// ValidateCreate implements admission.Validator: the spec must be valid and fit the quota.
func (v Validator) ValidateCreate(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (admission.Warnings, error) {
	if err := invalid(ad, nil); err != nil {
		return nil, err
	}
	if err := v.refuseSecretUse(ctx, ad); err != nil {
		return nil, err
	}
	return warnings(ad), v.Quota.Reserve(ctx, ad, nil, dryRun(ctx))
}

// ValidateUpdate implements admission.Validator: the spec must be valid and any growth must fit the quota.
func (v Validator) ValidateUpdate(ctx context.Context, old, ad *agentraxv1alpha1.AgentDeployment) (admission.Warnings, error) {
	if ad.DeletionTimestamp != nil {
		// Finalizer removal and other edits of a leaving object: nothing to check or reserve.
		return nil, nil
	}
	if err := invalid(ad, old); err != nil {
		return nil, err
	}
	if err := v.refuseSecretUse(ctx, ad); err != nil {
		return nil, err
	}
	return warnings(ad), v.Quota.Reserve(ctx, ad, old, dryRun(ctx))
}

// ValidateDelete implements admission.Validator; the webhook is not registered for DELETE. Deletes are never
// blocked, and the quota charge is not released here: the agent's pods still hold their GPUs until the garbage
// collector has removed them, so the TenantQuota controller drops the reservation once they are gone.
func (v Validator) ValidateDelete(context.Context, *agentraxv1alpha1.AgentDeployment) (admission.Warnings, error) {
	return nil, nil
}

func invalid(ad, old *agentraxv1alpha1.AgentDeployment) error {
	if errs := ValidateAgentDeployment(ad, old); len(errs) > 0 {
		return apierrors.NewInvalid(agentraxv1alpha1.GroupVersion.WithKind("AgentDeployment").GroupKind(), ad.Name, errs)
	}
	return nil
}

func dryRun(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && req.DryRun != nil && *req.DryRun
}

// refuseSecretUse refuses an agent whose env names a Secret (valueFrom.secretKeyRef) the requesting user may not
// read: creating the agent would otherwise hand its author every Secret of the namespace. Checked on create and
// on every update (another user's edit re-asserts the references it keeps).
func (v Validator) refuseSecretUse(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) error {
	if v.Requester == nil {
		return nil
	}
	var uses []requester.Use
	for i, e := range ad.Spec.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		p := field.NewPath("spec", "env").Index(i).Child("valueFrom", "secretKeyRef", "name")
		uses = append(uses, requester.SecretGet(p, ad.Namespace, e.ValueFrom.SecretKeyRef.Name))
	}
	if len(uses) == 0 {
		return nil
	}
	return v.Requester.Refuse(ctx, agentraxv1alpha1.GroupVersion.WithResource("agentdeployments").GroupResource(),
		ad.Name, uses...)
}
