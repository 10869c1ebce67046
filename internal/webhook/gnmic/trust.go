package gnmic

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// Trust is the requester check of the gnmic webhooks: every field that names a Secret or ConfigMap, and every
// Target whose address would receive a profile's device credentials, is admitted only when the requesting user
// could read those objects themselves (internal/requester: a SubjectAccessReview with the request's userInfo).
// A nil *Trust, or one with Enforce false (--enforce-secret-use-authz=false), checks nothing.
type Trust struct {
	// Enforce is --enforce-secret-use-authz.
	Enforce bool
	// Reviews creates SubjectAccessReviews (the manager's client).
	Reviews client.Client
	// Profiles reads the TargetProfile a Target names, straight from the API server (not a cache that may lag
	// behind a profile change made a moment ago).
	Profiles client.Reader
	// Self is the operator's own user name: the TargetSource controller writes Targets under it, from a
	// TargetSource whose author was checked, and it may read every Secret it would be asked about; reviewing
	// each of thousands of generated Targets would only halve the controller's write budget.
	Self string
}

// NewTrust is the manager's Trust: reviews through its client, profiles read from the API server, and its own
// user name asked once (a SelfSubjectReview, 10 s at most; without an answer nobody is exempt).
func NewTrust(mgr ctrl.Manager, enforce bool) *Trust {
	t := &Trust{Enforce: enforce, Reviews: mgr.GetClient(), Profiles: mgr.GetAPIReader()}
	if enforce {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t.Self = selfUser(ctx, mgr.GetClient())
	}
	return t
}

func (t *Trust) checker() *requester.Checker {
	return &requester.Checker{Reviews: t.Reviews}
}

func (t *Trust) on() bool { return t != nil && t.Enforce }

// refuse runs the uses as the requester and returns a 403 naming each refused field; nil when allowed or off.
func (t *Trust) refuse(ctx context.Context, resource, name string, uses []requester.Use) error {
	if !t.on() || len(uses) == 0 {
		return nil
	}
	if t.Self != "" {
		if user, err := requester.User(ctx); err == nil && user.Username == t.Self {
			return nil
		}
	}
	return t.checker().Refuse(ctx, gnmicv1alpha1.GroupVersion.WithResource(resource).GroupResource(), name, uses...)
}

// targetSourceUses are the Secrets and ConfigMaps a TargetSource makes the operator read, and the profiles whose
// credentials its Targets would carry.
//
// The credentials rule: a Target sends its profile's device credentials to its own address, and a TargetSource
// chooses both. Profiles it names (spec.target.profile, static devices' profiles) need get on their credentials
// Secret. An HTTP, ConfigMap or Secret inventory may name any profile of the namespace in its documents, so such
// a source needs list on Secrets in the namespace (the right to read every credential it could pick).
func (t *Trust) targetSourceUses(ctx context.Context, ts *gnmicv1alpha1.TargetSource) ([]requester.Use, error) {
	ns := ts.Namespace
	src := field.NewPath("spec", "source")
	var uses []requester.Use
	s := ts.Spec.Source
	if s.ConfigMap != nil {
		uses = append(uses, requester.ConfigMapGet(src.Child("configMap", "name"), ns, s.ConfigMap.Name))
	}
	if s.Secret != nil {
		uses = append(uses, requester.SecretGet(src.Child("secret", "name"), ns, s.Secret.Name))
	}
	if h := s.HTTP; h != nil {
		auth := src.Child("http", "auth")
		if a := h.Auth; a != nil {
			if a.Basic != nil {
				uses = append(uses, requester.SecretGet(auth.Child("basic", "secretRef", "name"), ns, a.Basic.SecretRef.Name))
			}
			if a.Token != nil {
				uses = append(uses, requester.SecretGet(auth.Child("token", "secretRef", "name"), ns, a.Token.SecretRef.Name))
			}
			if a.Header != nil {
				uses = append(uses, requester.SecretGet(auth.Child("header", "secretRef", "name"), ns, a.Header.SecretRef.Name))
			}
		}
		if tls := h.TLS; tls != nil {
			p := src.Child("http", "tls")
			if tls.CABundleRef != nil {
				uses = append(uses, requester.ConfigMapGet(p.Child("caBundleRef", "name"), ns, tls.CABundleRef.Name))
			}
			if tls.ClientCertRef != nil {
				uses = append(uses, requester.SecretGet(p.Child("clientCertRef", "name"), ns, tls.ClientCertRef.Name))
			}
		}
	}
	if w := ts.Spec.Webhook; w != nil && w.Auth != nil {
		p := field.NewPath("spec", "webhook", "auth")
		if w.Auth.Bearer != nil {
			uses = append(uses, requester.SecretGet(p.Child("bearer", "secretRef", "name"), ns, w.Auth.Bearer.SecretRef.Name))
		}
		if w.Auth.Signature != nil {
			uses = append(uses, requester.SecretGet(p.Child("signature", "secretRef", "name"), ns, w.Auth.Signature.SecretRef.Name))
		}
	}
	if s.Type != gnmicv1alpha1.SourceTypeStatic {
		uses = append(uses, requester.Use{Field: src.Child("type"), Verb: "list", Resource: "secrets", Namespace: ns})
	}
	profiles := []struct {
		path *field.Path
		name string
	}{{field.NewPath("spec", "target", "profile"), ts.Spec.Target.Profile}}
	if s.Static != nil {
		for i, d := range s.Static.Devices {
			profiles = append(profiles, struct {
				path *field.Path
				name string
			}{src.Child("static", "devices").Index(i).Child("profile"), d.Profile})
		}
	}
	for _, p := range profiles {
		use, err := t.credentialsUse(ctx, p.path, ns, p.name)
		if err != nil {
			return nil, err
		}
		uses = append(uses, use...)
	}
	return uses, nil
}

// credentialsUse is the get of profile ns/name's credentials Secret, when the profile exists and has one. A
// profile that does not exist yet carries no credentials; whoever creates it later must be able to read the
// Secret it names (the TargetProfile check).
func (t *Trust) credentialsUse(ctx context.Context, path *field.Path, ns, name string) ([]requester.Use, error) {
	if name == "" || t.Profiles == nil {
		return nil, nil
	}
	p := &gnmicv1alpha1.TargetProfile{}
	if err := t.Profiles.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading TargetProfile %s/%s for the credentials check: %w", ns, name, err)
	}
	if p.Spec.CredentialsRef == nil {
		return nil, nil
	}
	return []requester.Use{requester.SecretGet(path, ns, p.Spec.CredentialsRef.Name)}, nil
}

// targetProfileUses are the Secrets and ConfigMaps a TargetProfile hands to the collectors: the credentials
// (sent to every Target's address), the client certificate and the CA bundle.
func targetProfileUses(p *gnmicv1alpha1.TargetProfile) []requester.Use {
	spec := field.NewPath("spec")
	ns := p.Namespace
	var uses []requester.Use
	if p.Spec.CredentialsRef != nil {
		uses = append(uses, requester.SecretGet(spec.Child("credentialsRef", "name"), ns, p.Spec.CredentialsRef.Name))
	}
	if tls := p.Spec.TLS; tls != nil {
		path := spec.Child("tls")
		if tls.ClientCertRef != nil {
			uses = append(uses, requester.SecretGet(path.Child("clientCertRef", "name"), ns, tls.ClientCertRef.Name))
		}
		if b := tls.CABundle; b != nil {
			if b.SecretRef != nil {
				uses = append(uses, requester.SecretGet(path.Child("caBundle", "secretRef", "name"), ns, b.SecretRef.Name))
			}
			if b.ConfigMapRef != nil {
				uses = append(uses, requester.ConfigMapGet(path.Child("caBundle", "configMapRef", "name"), ns, b.ConfigMapRef.Name))
			}
		}
	}
	return uses
}

// clusterUses are the Secrets and ConfigMaps a Cluster mounts into the collector pods (env, which the collectors'
// configuration can then send anywhere; the tunnel's client CA).
func clusterUses(c *gnmicv1alpha1.Cluster) []requester.Use {
	var uses []requester.Use
	if t := c.Spec.GRPCTunnel; t != nil && t.ClientCARef != nil {
		uses = append(uses, requester.SecretGet(field.NewPath("spec", "grpcTunnel", "clientCARef", "name"), c.Namespace, t.ClientCARef.Name))
	}
	for i, e := range c.Spec.Env {
		if e.ValueFrom == nil {
			continue
		}
		path := field.NewPath("spec", "env").Index(i).Child("valueFrom")
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			uses = append(uses, requester.SecretGet(path.Child("secretKeyRef", "name"), c.Namespace, r.Name))
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			uses = append(uses, requester.ConfigMapGet(path.Child("configMapKeyRef", "name"), c.Namespace, r.Name))
		}
	}
	return uses
}

// targetUses is the credentials rule of a Target: its profile's device credentials go to its address, so a
// new Target, or one whose address or profile changes, needs get on the profile's credentials Secret.
func (t *Trust) targetUses(ctx context.Context, old, tgt *gnmicv1alpha1.Target) ([]requester.Use, error) {
	if old != nil && old.Spec.Address == tgt.Spec.Address && old.Spec.Profile == tgt.Spec.Profile {
		return nil, nil
	}
	return t.credentialsUse(ctx, field.NewPath("spec", "profile"), tgt.Namespace, tgt.Spec.Profile)
}

// selfUser is the user name the manager's client authenticates as (a SelfSubjectReview); empty when the API
// server cannot say, which only costs the TargetSource controller's Targets a review each.
func selfUser(ctx context.Context, c client.Client) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return ""
	}
	return review.Status.UserInfo.Username
}
