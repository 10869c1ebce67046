package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator creates its guard and reads it back by name; it can neither change nor delete it, nor any other
// admission policy (create cannot be limited by name, but a new policy or binding can only refuse more).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get,resourceNames=quartet-operator-escalation-guard;quartet-operator-tenant-guard
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// DigestAnnotation records a digest of the spec the operator created, so a later start can tell the guard it
// finds (it may only get it, never change it) is the one this version would create.
const DigestAnnotation = "quartet-operator.dev/guard-digest"

// Whoami asks the API server who the client is (a SelfSubjectReview, which every authenticated user may create).
func Whoami(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("SelfSubjectReview: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// Install creates the guard for o.User and the tenant identities' guard (TenantPolicy), or checks that the guard in place is this version's. It never updates or
// deletes one: the operator's identity has no right to. A guard from another version (or edited by hand) is an
// error naming what an administrator must delete, since the operator cannot replace it.
func Install(ctx context.Context, c client.Client, o Options) error {
	policy, binding := Policy(o)
	tenantPolicy, tenantBinding := TenantPolicy()
	for _, obj := range []client.Object{policy, binding, tenantPolicy, tenantBinding} {
		digest, err := specDigest(obj)
		if err != nil {
			return err
		}
		obj.SetAnnotations(map[string]string{DigestAnnotation: digest})
		err = c.Create(ctx, obj)
		if err == nil {
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
		live := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			return fmt.Errorf("reading %T %s: %w", obj, obj.GetName(), err)
		}
		if got := live.GetAnnotations()[DigestAnnotation]; got != digest {
			return fmt.Errorf("%T %s exists but is not the guard this version creates (digest %q, want %q): "+
				"an administrator deletes it (and its binding) so the operator can create it again", obj, obj.GetName(), got, digest)
		}
	}
	return nil
}

func specDigest(obj client.Object) (string, error) {
	var spec any
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		spec = o.Spec
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		spec = o.Spec
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

// ProbeUserAgent marks Enforced's probe requests: the guard refuses them on purpose, so an audit of the operator's
// forbidden requests can leave them out.
const ProbeUserAgent = "quartet-operator-guard-probe"

// Enforced reports whether the API server enforces the guard for the client's identity: a dry-run ServiceAccount
// token Secret in namespace ns must be refused by the guard. The API server loads a new policy within a second or
// two; callers poll with a deadline. Give c the user agent ProbeUserAgent.
func Enforced(ctx context.Context, c client.Client, ns string) error {
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "guard-probe-",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}, Type: corev1.SecretTypeServiceAccountToken}
	err := c.Create(ctx, probe, client.DryRunAll)
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), Name) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("the API server does not enforce %s yet: a token Secret was admitted (dry run)", Name)
	}
	return fmt.Errorf("probing %s: %w", Name, err)
}
