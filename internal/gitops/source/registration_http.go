package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/renderer"
	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// RegisteredTarget is one source target as the registration API lists it.
type RegisteredTarget struct {
	Name             string `json:"name"`
	RepoURL          string `json:"repoURL"`
	Ref              string `json:"ref"`
	Path             string `json:"path"`
	CredentialSecret string `json:"credentialSecret,omitempty"`
	LastResult       string `json:"lastResult,omitempty"`
	EventID          string `json:"eventID,omitempty"`
	// DeployedCommit is the commit the inventory records; HeadCommit the head of the ref the last poll saw. When
	// they differ the target is behind git (LastResult says whether its last event failed).
	DeployedCommit string `json:"deployedCommit,omitempty"`
	HeadCommit     string `json:"headCommit,omitempty"`
	Suspended      bool   `json:"suspended,omitempty"`
	LastError      string `json:"lastError,omitempty"`
	// RenamedFrom is the predecessor this target replaces; ClaimConflict the objects another source target of the
	// namespace declares too (katastroma.org/claim-conflict, written by the provisioner); ServedBy the Platform
	// whose source handler serves the target (katastroma.org/served-by).
	RenamedFrom   string `json:"renamedFrom,omitempty"`
	ClaimConflict string `json:"claimConflict,omitempty"`
	ServedBy      string `json:"servedBy,omitempty"`
}

const maxRegistrationBody = 1 << 20

// registerRoutes adds the registration API: tenants register, list and delete source targets and their
// credentials. Every request carries a Kubernetes ServiceAccount token (Authorization: Bearer); the API server
// authenticates it (TokenReview) and the ServiceAccount's namespace must belong to the same tenant as the target
// namespace.
func (h *Handler) registerRoutes(mux *http.ServeMux) {
	const base = "/api/v1/namespaces/{namespace}/sourcetargets"
	mux.HandleFunc("GET "+base, h.authorized(h.listTargets))
	mux.HandleFunc("PUT "+base+"/{name}", h.authorized(h.putTarget))
	mux.HandleFunc("DELETE "+base+"/{name}", h.authorized(h.deleteTarget))
}

// authorized authenticates the caller and checks its tenant against the target namespace's.
func (h *Handler) authorized(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			reply(w, http.StatusUnauthorized, map[string]any{"error": "a ServiceAccount token is required (Authorization: Bearer)"})
			return
		}
		callerNS, user, err := h.authenticate(ctx, token)
		if err != nil {
			reply(w, http.StatusUnauthorized, map[string]any{"error": err.Error()})
			return
		}
		ns := r.PathValue("namespace")
		target, err := h.tenantLabel(ctx, ns)
		if err != nil {
			logf.FromContext(ctx).Error(err, "reading the namespace", "namespace", ns)
			reply(w, http.StatusInternalServerError, map[string]any{"error": "reading namespace " + ns})
			return
		}
		caller, err := h.tenantLabel(ctx, callerNS)
		if err != nil {
			reply(w, http.StatusInternalServerError, map[string]any{"error": "reading namespace " + callerNS})
			return
		}
		// Both must be tenant namespaces of the same tenant: an unlabelled namespace belongs to no tenant. The
		// label alone is not proof (anyone allowed to create a namespace can create it labelled): the Tenant it
		// names must list both namespaces.
		member := false
		if target != "" && target == caller {
			if member, err = h.tenantHolds(ctx, target, ns, callerNS); err != nil {
				logf.FromContext(ctx).Error(err, "reading the tenant", "tenant", target)
				reply(w, http.StatusInternalServerError, map[string]any{"error": "reading tenant " + target})
				return
			}
		}
		if !member {
			reply(w, http.StatusForbidden, map[string]any{"error": fmt.Sprintf("namespace %s is not a namespace of the caller's tenant", ns)})
			return
		}
		// A tenant's namespaces are not equals: a dev namespace's ServiceAccount must not replace or delete prod's
		// targets (a delete prunes everything the target deployed). Outside its own namespace the caller needs the
		// right itself, on the virtual resource sourcetargets.katastroma.org there, which an administrator grants.
		if callerNS != ns {
			use := requester.Use{Verb: registrationVerb(r.Method), Group: gitopsv1alpha1.GroupVersion.Group,
				Resource: "sourcetargets", Namespace: ns, Name: r.PathValue("name")}
			allowed, _, err := (&requester.Checker{Reviews: h.Client}).Allowed(requester.ContextWithUser(ctx, user), use)
			if err != nil {
				logf.FromContext(ctx).Error(err, "reviewing the caller's access", "namespace", ns)
				reply(w, http.StatusInternalServerError, map[string]any{"error": "reviewing the caller's access to namespace " + ns})
				return
			}
			if !allowed {
				reply(w, http.StatusForbidden, map[string]any{"error": fmt.Sprintf("%s may not %s sourcetargets.%s in namespace %s: "+
					"outside its own namespace a caller needs that right there", user.Username, use.Verb, use.Group, ns)})
				return
			}
		}
		next(w, r.WithContext(withCaller(ctx, callerNS, user)))
	}
}

// registrationVerb is the verb a registration request needs on sourcetargets.
func registrationVerb(method string) string {
	switch method {
	case http.MethodPut:
		return "update"
	case http.MethodDelete:
		return "delete"
	}
	return "list"
}

// authenticate returns the namespace of the ServiceAccount the token belongs to, and the user the API server
// authenticated.
func (h *Handler) authenticate(ctx context.Context, token string) (string, authenticationv1.UserInfo, error) {
	audience := h.audience()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := h.Client.Create(ctx, tr); err != nil {
		return "", authenticationv1.UserInfo{}, fmt.Errorf("the token could not be reviewed: %w", err)
	}
	if !tr.Status.Authenticated {
		return "", authenticationv1.UserInfo{}, errors.New("the token is not valid")
	}
	// The API server answers with the requested audiences the token is valid for; a token issued for another
	// service (or the API server itself) must not be replayable here.
	if !slices.Contains(tr.Status.Audiences, audience) {
		return "", authenticationv1.UserInfo{}, fmt.Errorf("the token was not issued for audience %s", audience)
	}
	parts := strings.Split(tr.Status.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", authenticationv1.UserInfo{}, errors.New("only ServiceAccount tokens are accepted")
	}
	return parts[2], tr.Status.User, nil
}

// DefaultRegistrationAudience is the token audience the registration API requires when Handler.Audience is empty.
const DefaultRegistrationAudience = "katastroma-registration"

func (h *Handler) audience() string {
	if h.Audience == "" {
		return DefaultRegistrationAudience
	}
	return h.Audience
}

// tenantHolds reports whether the Tenant named tenant lists every namespace in its spec.
func (h *Handler) tenantHolds(ctx context.Context, tenant string, namespaces ...string) (bool, error) {
	t := &gitopsv1alpha1.Tenant{}
	if err := h.Client.Get(ctx, types.NamespacedName{Name: tenant}, t); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if t.DeletionTimestamp != nil {
		return false, nil
	}
	for _, ns := range namespaces {
		if !slices.Contains(t.Spec.Namespaces, ns) {
			return false, nil
		}
	}
	return true, nil
}

// tenantLabel is a namespace's tenant label ("" when the namespace or the label is missing).
func (h *Handler) tenantLabel(ctx context.Context, ns string) (string, error) {
	n := &corev1.Namespace{}
	if err := h.Client.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return n.Labels[pipeline.LabelTenant], nil
}

func (h *Handler) listTargets(w http.ResponseWriter, r *http.Request) {
	cms, err := h.Targets(r.Context(), r.PathValue("namespace"))
	if err != nil {
		reply(w, http.StatusInternalServerError, map[string]any{"error": "listing source targets"})
		return
	}
	out := make([]RegisteredTarget, 0, len(cms))
	for _, cm := range cms {
		out = append(out, RegisteredTarget{Name: cm.Name, RepoURL: pipeline.RedactURL(cm.Data["repo-url"]), Ref: cm.Data["ref"],
			Path: cm.Data["path"], CredentialSecret: cm.Annotations[pipeline.AnnotationCredentials],
			LastResult: cm.Annotations[pipeline.AnnotationResult], EventID: cm.Annotations[pipeline.AnnotationEventID],
			DeployedCommit: cm.Annotations[pipeline.AnnotationDeployed], HeadCommit: cm.Annotations[AnnotationHeadSeen],
			Suspended: cm.Annotations[AnnotationSuspend] == "true",
			LastError: cm.Annotations[AnnotationLastError], RenamedFrom: cm.Annotations[pipeline.AnnotationRenamedFrom],
			ClaimConflict: cm.Annotations[pipeline.AnnotationClaimConflict], ServedBy: cm.Annotations[AnnotationServedBy]})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"items": out})
}

// putTarget creates or replaces a source target (and its credential Secret). Lease and event annotations of an
// existing target are kept: replacing the repository does not forget a running lease.
func (h *Handler) putTarget(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	var reg Registration
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRegistrationBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&reg); err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"error": "body: " + err.Error()})
		return
	}
	if errs := ValidateRegistration(name, &reg); len(errs) > 0 {
		reply(w, http.StatusUnprocessableEntity, map[string]any{"error": errs.ToAggregate().Error()})
		return
	}
	if !h.renameAllowed(w, r, ns, name, reg.RenamedFrom) {
		return
	}
	secretName := ""
	if reg.Credentials != nil {
		secretName = name + CredentialSecretSuffix
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName}}
		_, err := controllerutil.CreateOrUpdate(ctx, h.Client, s, func() error {
			// Never overwrite a Secret the registration API did not create (an application's own).
			if !s.CreationTimestamp.IsZero() && s.Labels[pipeline.LabelSourceTarget] != name {
				return errNotATarget
			}
			s.Labels = mergeLabels(s.Labels, map[string]string{pipeline.LabelSourceTarget: name})
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[AnnotationCredentialsFor] = NormalizeRepoURL(reg.RepoURL)
			s.Type, s.Data = corev1.SecretTypeOpaque, reg.Credentials.Data()
			return nil
		})
		if errors.Is(err, errNotATarget) {
			reply(w, http.StatusConflict, map[string]any{"error": fmt.Sprintf("Secret %s/%s exists and does not belong to source target %s", ns, secretName, name)})
			return
		}
		if err != nil {
			h.writeFailed(w, r, err)
			return
		}
	}
	// Helm values may hold credentials: they go into a Secret, never into the ConfigMap (overrides.go).
	overridesSecret := ""
	if reg.Overrides != "" {
		var err error
		if overridesSecret, err = writeOverridesSecret(ctx, h.Client, ns, name, reg.Overrides); err != nil {
			if errors.Is(err, errNotTheTargets) {
				reply(w, http.StatusConflict, map[string]any{"error": err.Error()})
				return
			}
			h.writeFailed(w, r, err)
			return
		}
	} else if err := deleteOverridesSecret(ctx, h.Client, ns, name); err != nil {
		h.writeFailed(w, r, err)
		return
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	op, err := controllerutil.CreateOrUpdate(ctx, h.Client, cm, func() error {
		if cm.CreationTimestamp.IsZero() || cm.Labels[pipeline.LabelType] == pipeline.TypeSourceTarget {
			cm.Labels = mergeLabels(cm.Labels, map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget})
		} else {
			return errNotATarget
		}
		cm.Data = map[string]string{"repo-url": reg.RepoURL, "ref": reg.Ref, "path": reg.Path}
		if reg.HelmHooks != "" {
			cm.Data[renderer.DataHelmHooks] = reg.HelmHooks
		}
		if reg.ReconcileInterval != "" {
			cm.Data[DataReconcileInterval] = reg.ReconcileInterval
		}
		if reg.VerifyTimeout != "" {
			cm.Data["verify-timeout"] = reg.VerifyTimeout
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		if secretName != "" {
			cm.Annotations[pipeline.AnnotationCredentials] = secretName
		} else {
			delete(cm.Annotations, pipeline.AnnotationCredentials)
		}
		if reg.RenamedFrom != "" {
			cm.Annotations[pipeline.AnnotationRenamedFrom] = reg.RenamedFrom
		} else {
			delete(cm.Annotations, pipeline.AnnotationRenamedFrom)
		}
		if overridesSecret != "" {
			cm.Annotations[AnnotationOverridesSecret] = overridesSecret
		} else {
			delete(cm.Annotations, AnnotationOverridesSecret)
		}
		// A target registered here is served by this API's Platform; a replaced one keeps its pin.
		pin(cm, h.Lease.Platform)
		return nil
	})
	if errors.Is(err, errNotATarget) {
		reply(w, http.StatusConflict, map[string]any{"error": fmt.Sprintf("ConfigMap %s/%s exists and is not a source target", ns, name)})
		return
	}
	if err != nil {
		h.writeFailed(w, r, err)
		return
	}
	code := http.StatusOK
	if op == controllerutil.OperationResultCreated {
		code = http.StatusCreated
	}
	answer := map[string]any{"name": name, "credentialSecret": secretName}
	for k, a := range map[string]string{"renamedFrom": pipeline.AnnotationRenamedFrom,
		"claimConflict": pipeline.AnnotationClaimConflict, "servedBy": AnnotationServedBy} {
		if v := cm.Annotations[a]; v != "" {
			answer[k] = v
		}
	}
	reply(w, code, answer)
}

var errNotATarget = errors.New("not a source target")

func (h *Handler) deleteTarget(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	cm := &corev1.ConfigMap{}
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			reply(w, http.StatusNotFound, map[string]any{"error": "no source target " + name})
			return
		}
		h.writeFailed(w, r, err)
		return
	}
	if cm.Labels[pipeline.LabelType] != pipeline.TypeSourceTarget {
		reply(w, http.StatusNotFound, map[string]any{"error": "no source target " + name})
		return
	}
	// What the target deployed is pruned before the ConfigMap goes (its finalizer, deletion.go), unless it
	// carries katastroma.org/orphan-on-delete: "true".
	if err := h.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		h.writeFailed(w, r, err)
		return
	}
	if err := deleteOverridesSecret(ctx, h.Client, ns, name); err != nil {
		h.writeFailed(w, r, err)
		return
	}
	if s := cm.Annotations[pipeline.AnnotationCredentials]; s == name+CredentialSecretSuffix {
		secret := &corev1.Secret{}
		err := h.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: s}, secret)
		if err == nil && secret.Labels[pipeline.LabelSourceTarget] == name {
			err = h.Client.Delete(ctx, secret)
		}
		if client.IgnoreNotFound(err) != nil {
			h.writeFailed(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) writeFailed(w http.ResponseWriter, r *http.Request, err error) {
	logf.FromContext(r.Context()).Error(err, "registration write failed")
	reply(w, http.StatusInternalServerError, map[string]any{"error": "storing the source target failed"})
}

func mergeLabels(into, add map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range add {
		into[k] = v
	}
	return into
}
