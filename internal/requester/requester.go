// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Package requester answers one question for every group's admission webhooks: could the user who sent this
// request do, themselves, what a field of their object asks the operator to do with its own rights? A field that
// names a Secret, a namespace, a role or another team's object is a request to use the operator's identity on the
// requester's behalf; the answer comes from a SubjectAccessReview carrying the admission request's userInfo, so the
// API server's own authorizers (RBAC, webhooks, node) decide, on create and on update alike.
package requester

import (
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Use is one thing a field asks the operator to do: the requester must be allowed Verb on the resource.
type Use struct {
	// Field is the path of the field that asks, for the refusal's message (e.g. spec.auth.secretRef.name).
	Field *field.Path
	// Verb, Group, Resource, Subresource, Namespace and Name are the SubjectAccessReview's resource attributes.
	Verb, Group, Resource, Subresource, Namespace, Name string
}

// SecretGet is the use of a field that names Secret ns/name: the operator will read it on the requester's behalf.
func SecretGet(path *field.Path, ns, name string) Use {
	return Use{Field: path, Verb: "get", Resource: "secrets", Namespace: ns, Name: name}
}

// ConfigMapGet is the use of a field that names ConfigMap ns/name: the operator will read it on the requester's
// behalf (its data can end up in objects or requests the requester sees).
func ConfigMapGet(path *field.Path, ns, name string) Use {
	return Use{Field: path, Verb: "get", Resource: "configmaps", Namespace: ns, Name: name}
}

// Checker asks the API server. A nil *Checker allows everything: callers that switch the checks off pass nil.
type Checker struct {
	// Reviews creates SubjectAccessReviews (the manager's client; the operator holds create on them).
	Reviews client.Client
}

// ErrNoRequest is returned when the context carries no admission request: nobody to check, so nothing is allowed.
var ErrNoRequest = errors.New("no admission request in the context")

// User is the requesting user of the admission request in ctx.
func User(ctx context.Context) (authenticationv1.UserInfo, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("%w: %w", ErrNoRequest, err)
	}
	return req.UserInfo, nil
}

// ContextWithUser carries user as the requester outside an admission webhook (an API the operator serves that
// authenticated its caller with a TokenReview), so the same checks decide there.
func ContextWithUser(ctx context.Context, user authenticationv1.UserInfo) context.Context {
	return admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UserInfo: user}})
}

// Allowed reports whether the requesting user may do u, and the user's name for messages.
func (c *Checker) Allowed(ctx context.Context, u Use) (bool, string, error) {
	user, err := User(ctx)
	if err != nil {
		return false, "", err
	}
	if c == nil {
		return true, user.Username, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: u.Verb, Group: u.Group, Resource: u.Resource, Subresource: u.Subresource,
			Namespace: u.Namespace, Name: u.Name,
		},
	}}
	if err := c.Reviews.Create(ctx, sar); err != nil {
		return false, user.Username, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	return sar.Status.Allowed, user.Username, nil
}

// Check reviews every use and returns one field error per refused use, naming the field, the user and what they
// may not do. A review that fails is returned as err: the caller refuses the request (fail closed).
func (c *Checker) Check(ctx context.Context, uses ...Use) (field.ErrorList, error) {
	var errs field.ErrorList
	for _, u := range uses {
		if u.Name == "" && u.Verb == "get" {
			continue // a field left empty names nothing
		}
		ok, user, err := c.Allowed(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u.Field, err)
		}
		if !ok {
			errs = append(errs, field.Forbidden(u.Field, describe(user, u)))
		}
	}
	return errs, nil
}

// Refuse reviews every use and turns refusals into one 403 Forbidden on gr/name naming each field; a failed
// review refuses too, saying so. nil when every use is allowed.
func (c *Checker) Refuse(ctx context.Context, gr schema.GroupResource, name string, uses ...Use) error {
	errs, err := c.Check(ctx, uses...)
	if err != nil {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("the requester check could not decide, so the request is refused: %w", err))
	}
	if len(errs) > 0 {
		return apierrors.NewForbidden(gr, name, errs.ToAggregate())
	}
	return nil
}

func describe(user string, u Use) string {
	what := u.Resource
	if u.Group != "" {
		what += "." + u.Group
	}
	if u.Subresource != "" {
		what += "/" + u.Subresource
	}
	target := u.Name
	if u.Namespace != "" {
		target = u.Namespace + "/" + u.Name
	}
	if u.Name == "" {
		target = fmt.Sprintf("in namespace %q", u.Namespace)
		if u.Namespace == "" {
			target = "cluster-wide"
		}
		return fmt.Sprintf("user %q may not %s %s %s, so this field may not ask the operator to", user, u.Verb, what, target)
	}
	return fmt.Sprintf("user %q may not %s %s %s, so this field may not name it", user, u.Verb, what, target)
}
