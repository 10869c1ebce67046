package source

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// callerKey carries the authenticated caller of a registration request (authorized) to the handlers.
type callerKey struct{}

// caller is the registration request's ServiceAccount: its namespace and the user the API server authenticated.
type caller struct {
	namespace string
	user      authenticationv1.UserInfo
}

func withCaller(ctx context.Context, ns string, user authenticationv1.UserInfo) context.Context {
	return context.WithValue(requester.ContextWithUser(ctx, user), callerKey{}, caller{namespace: ns, user: user})
}

// renameAllowed checks a registration's renamedFrom before anything is stored and answers the refusal itself.
// Naming a predecessor hands the new target that target's objects (relabelled in place) and inventory, and the
// predecessor's deletion then prunes nothing: it acts on the predecessor as much as deleting it does. So:
//   - the predecessor must be a source target of the namespace (422 naming renamedFrom), unless the target
//     already names it (a registration sent again after the predecessor went);
//   - outside its own namespace the caller needs `delete` on sourcetargets.katastroma.org named after the
//     predecessor there (the same SubjectAccessReview as the rest of the API, 403 naming renamedFrom): a Role
//     granting update on one target's name does not reach a neighbour's objects.
//
// Another namespace cannot be named at all (ValidateRegistration).
func (h *Handler) renameAllowed(w http.ResponseWriter, r *http.Request, ns, name, pred string) bool {
	if pred == "" {
		return true
	}
	ctx := r.Context()
	p := field.NewPath("renamedFrom")
	current := &corev1.ConfigMap{}
	err := h.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, current)
	if err != nil && !apierrors.IsNotFound(err) {
		h.writeFailed(w, r, err)
		return false
	}
	again := err == nil && current.Annotations[pipeline.AnnotationRenamedFrom] == pred
	if !again {
		old := &corev1.ConfigMap{}
		err := h.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pred}, old)
		if apierrors.IsNotFound(err) || (err == nil && old.Labels[pipeline.LabelType] != pipeline.TypeSourceTarget) {
			reply(w, http.StatusUnprocessableEntity, map[string]any{"error": field.NotFound(p, pred).Error() +
				": no source target of that name in namespace " + ns})
			return false
		}
		if err != nil {
			h.writeFailed(w, r, err)
			return false
		}
	}
	c, _ := ctx.Value(callerKey{}).(caller)
	if c.namespace == ns {
		return true // a ServiceAccount registers freely in its own namespace, as for every other request
	}
	use := requester.Use{Field: p, Verb: "delete", Group: gitopsv1alpha1.GroupVersion.Group, Resource: "sourcetargets",
		Namespace: ns, Name: pred}
	allowed, user, err := (&requester.Checker{Reviews: h.Client}).Allowed(ctx, use)
	if err != nil {
		logf.FromContext(ctx).Error(err, "reviewing the caller's access to the renamed target", "namespace", ns)
		reply(w, http.StatusInternalServerError, map[string]any{"error": "reviewing the caller's access to namespace " + ns})
		return false
	}
	if !allowed {
		reply(w, http.StatusForbidden, map[string]any{"error": fmt.Sprintf("%s: %s may not delete sourcetargets.%s %s in "+
			"namespace %s: taking a source target over needs the right to delete it", p, user, use.Group, pred, ns)})
		return false
	}
	return true
}
