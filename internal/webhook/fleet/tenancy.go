package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
	"github.com/quartet-dev/quartet-operator/internal/fleet/tenant"
	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// Tenancy is the admission checks that depend on who asks: TenantPolicy enforcement and the cross-namespace
// discovery SubjectAccessReview. A nil *Tenancy (or one with both switches off) checks nothing.
type Tenancy struct {
	// Policies reads TenantPolicies (the manager's cached client).
	Policies client.Reader
	// Namespaces reads Namespace labels directly from the API server.
	Namespaces client.Reader
	// Reviews creates SubjectAccessReviews.
	Reviews client.Client
	// EnforcePolicies is --enable-tenant-policy-enforcement.
	EnforcePolicies bool
	// EnforceCrossNamespace is --enforce-cross-namespace-discovery-authz.
	EnforceCrossNamespace bool
	// EnforceSecretUse is --enforce-secret-use-authz.
	EnforceSecretUse bool
	// Collectors looks a collector up in Fleet Management: its current local and remote attributes merged, and
	// whether it is registered. nil checks only the attributes a Collector sets.
	Collectors func(ctx context.Context, id string) (attrs map[string]string, registered bool, err error)
	// PipelineMatchers looks a pipeline up in Fleet Management by name: its current matchers, and whether it
	// exists. nil refuses every adoption by a tenanted user (it cannot be judged).
	PipelineMatchers func(ctx context.Context, name string) (matchers []string, found bool, err error)
	// PipelineNameScope is --pipeline-name-scope, to derive the Fleet name a Pipeline would adopt.
	PipelineNameScope string
}

// bound returns the TenantPolicies that bind the requesting user in ns; none when enforcement is off.
func (t *Tenancy) bound(ctx context.Context, ns string) ([]*fleetv1alpha1.TenantPolicy, error) {
	if t == nil || !t.EnforcePolicies {
		return nil, nil
	}
	user, err := requester.User(ctx)
	if err != nil {
		return nil, err
	}
	list := &fleetv1alpha1.TenantPolicyList{}
	if err := t.Policies.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing TenantPolicies: %w", err)
	}
	return tenant.Applicable(list.Items, user, func() (map[string]string, error) {
		n := &corev1.Namespace{}
		if err := t.Namespaces.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return nil, err
		}
		return n.Labels, nil
	})
}

// forbidden turns tenancy field errors into a 403 naming the fields; an error finding the policies refuses too.
func forbidden(kind, name string, errs field.ErrorList, err error) error {
	gr := fleetv1alpha1.GroupVersion.WithResource(kind).GroupResource()
	if err != nil {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("TenantPolicy enforcement could not decide, so the request is refused: %w", err))
	}
	if len(errs) > 0 {
		return apierrors.NewForbidden(gr, name, errs.ToAggregate())
	}
	return nil
}

// CheckSelector enforces TenantPolicies on an object's matchers (and collector IDs).
func (t *Tenancy) CheckSelector(ctx context.Context, resource, ns, name string, path *field.Path, matchers, ids []string) error {
	policies, err := t.bound(ctx, ns)
	return forbidden(resource, name, tenant.CheckSelector(path, policies, matchers, ids), err)
}

// CheckAttributes enforces TenantPolicies on the attributes a RemoteAttributePolicy sets (values) or an
// ExternalAttributeSync maps (keys, since their values arrive later from outside).
func (t *Tenancy) CheckAttributes(ctx context.Context, resource, ns, name string, path *field.Path, values map[string]string, keys []string) error {
	policies, err := t.bound(ctx, ns)
	errs := tenant.CheckAttributeValues(path, policies, values)
	if len(policies) > 0 {
		errs = append(errs, tenant.CheckAttributeKeys(path, policies, keys)...)
	}
	return forbidden(resource, name, errs, err)
}

// CheckCollector enforces TenantPolicies on a Collector.
func (t *Tenancy) CheckCollector(ctx context.Context, c *fleetv1alpha1.Collector) error {
	policies, err := t.bound(ctx, c.Namespace)
	errs := tenant.CheckCollector(field.NewPath("spec"), policies, c.Spec.ID, c.Spec.RemoteAttributes)
	if err == nil && len(policies) > 0 && t.Collectors != nil {
		var current map[string]string
		var registered bool
		if current, registered, err = t.Collectors(ctx, c.Spec.ID); err != nil {
			err = fmt.Errorf("reading collector %q from Fleet Management: %w", c.Spec.ID, err)
		} else if registered {
			errs = append(errs, tenant.CheckCollectorCurrent(field.NewPath("spec"), policies, c.Spec.ID, current)...)
		} else {
			errs = append(errs, tenant.CheckUnregistered(field.NewPath("spec"), policies, c.Spec.ID)...)
		}
	}
	return forbidden("collectors", c.Name, errs, err)
}

// CheckAdoption enforces TenantPolicies on the pipeline a Pipeline with import-mode adopt would take over: the
// existing pipeline's matchers must confine it to the tenant too. A pipeline Fleet does not have yet is judged by
// the CR alone (CheckSelector); if Fleet cannot be read, the request is refused.
func (t *Tenancy) CheckAdoption(ctx context.Context, p *fleetv1alpha1.Pipeline) error {
	if !pipelines.Adopts(p) {
		return nil
	}
	policies, err := t.bound(ctx, p.Namespace)
	if err != nil || len(policies) == 0 {
		return forbidden("pipelines", p.Name, nil, err)
	}
	name := pipelines.FleetName(p, t.PipelineNameScope)
	path := field.NewPath("metadata", "annotations").Key(fleetv1alpha1.AnnotationImportMode)
	if t.PipelineMatchers == nil {
		return forbidden("pipelines", p.Name, nil, fmt.Errorf("%s: Fleet Management is not configured, so the pipeline to adopt cannot be checked", path))
	}
	matchers, found, err := t.PipelineMatchers(ctx, name)
	if err != nil {
		return forbidden("pipelines", p.Name, nil, fmt.Errorf("%s: reading Fleet pipeline %q: %w", path, name, err))
	}
	if !found {
		return nil
	}
	return forbidden("pipelines", p.Name, tenant.CheckAdoption(path, policies, name, matchers), nil)
}

// CheckPipelineDiscovery refuses PipelineDiscoveries from tenanted users: a discovery imports every pipeline of
// the stack, whatever tenant it serves, and the selector has no matchers to confine it.
func (t *Tenancy) CheckPipelineDiscovery(ctx context.Context, d *fleetv1alpha1.PipelineDiscovery) error {
	policies, err := t.bound(ctx, d.Namespace)
	var errs field.ErrorList
	if len(policies) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			"a user bound by a TenantPolicy may not create PipelineDiscoveries: they import every pipeline of the Fleet stack"))
	}
	return forbidden("pipelinediscoveries", d.Name, errs, err)
}

// CheckTarget is the cross-namespace discovery check: a discovery writing into another namespace is allowed
// only when the requesting user may create the discovered kind there.
func (t *Tenancy) CheckTarget(ctx context.Context, resource, ns, name, target, createdResource string) error {
	if t == nil || !t.EnforceCrossNamespace || target == "" || target == ns {
		return nil
	}
	return t.checker().Refuse(ctx, fleetv1alpha1.GroupVersion.WithResource(resource).GroupResource(), name, requester.Use{
		Field: field.NewPath("spec", "targetNamespace"), Verb: "create", Group: fleetv1alpha1.GroupVersion.Group,
		Resource: createdResource, Namespace: target,
	})
}

// CheckSecretUse is the Secret-use check: a CR that names a Secret is admitted only when the requesting user may
// get that Secret, so creating (or repointing) a sync cannot send credentials the user cannot read to a host of
// their choosing. It runs on every create and update that names a Secret, since a changed URL sends the same
// Secret elsewhere.
func (t *Tenancy) CheckSecretUse(ctx context.Context, resource, ns, name string, path *field.Path, secret string) error {
	if t == nil || !t.EnforceSecretUse || secret == "" {
		return nil
	}
	return t.checker().Refuse(ctx, fleetv1alpha1.GroupVersion.WithResource(resource).GroupResource(), name,
		requester.SecretGet(path, ns, secret))
}

func (t *Tenancy) checker() *requester.Checker { return &requester.Checker{Reviews: t.Reviews} }
