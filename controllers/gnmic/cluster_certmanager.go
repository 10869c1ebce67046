package gnmic

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// certificateGVK is cert-manager's Certificate. The operator handles it as unstructured: it needs four spec fields
// and one status condition, and cert-manager's Go module would pin its own Kubernetes libraries on the operator.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

const (
	// DefaultCertificateWait is how long the operator waits for cert-manager to write a Certificate's Secret
	// before it reports CertificateTimedOut, counted from certificateWaitStart.
	DefaultCertificateWait = 5 * time.Minute
	// certificatePoll is how often the Secret is looked at while waiting; a change of the (labelled) Secret also
	// starts a reconcile at once.
	certificatePoll = 5 * time.Second
	// annotationIssuanceRequested records (RFC 3339) when the operator last created or changed the Certificate's
	// spec, which asks cert-manager for a new issuance.
	annotationIssuanceRequested = "operator.gnmic.dev/issuance-requested"
)

// certPending says a certificate is not usable yet; the Cluster waits (no error backoff) and looks again after
// retry.
type certPending struct {
	reason, message string
	retry           time.Duration
}

func (e *certPending) Error() string { return e.message }

// issuedCert is a certificate, its key and its issuer's CA, read from a kubernetes.io/tls Secret.
type issuedCert struct {
	secretName             string
	certPEM, keyPEM, caPEM []byte
}

// certRequest describes one certificate the collectors need.
type certRequest struct {
	// name of the Certificate (cert-manager) or of the purpose ("api", "tunnel", "client").
	name       string
	secretName string
	dnsNames   []string
	// usages are cert-manager's key usage names.
	usages []string
	// needCA: the Secret must carry ca.crt (the operator trusts it for the REST API).
	needCA bool
}

func (r *ClusterReconciler) certificateWait() time.Duration {
	if r.CertificateWait > 0 {
		return r.CertificateWait
	}
	return DefaultCertificateWait
}

// certManagerCertificate keeps a cert-manager Certificate (owned by the Cluster) for req, signed by ref, and
// returns what cert-manager wrote in its Secret. While the Secret is missing or does not hold a certificate for
// req's names yet, it returns a *certPending: CertificatePending until the wait is over, then
// CertificateTimedOut with cert-manager's own Ready message.
func (r *ClusterReconciler) certManagerCertificate(ctx context.Context, c *gnmicv1alpha1.Cluster, ref *gnmicv1alpha1.IssuerReference,
	req certRequest) (*issuedCert, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	u.SetNamespace(c.Namespace)
	u.SetName(req.name)
	kind, group := ref.Kind, ref.Group
	if kind == "" {
		kind = "Issuer"
	}
	if group == "" {
		group = "cert-manager.io"
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, u, func() error {
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if spec == nil {
			spec = map[string]any{}
		}
		// Compared as JSON: the server's copy and the one built here may hold numbers as different Go types.
		before, _ := json.Marshal(spec)
		spec["secretName"] = req.secretName
		// The label lets the Cluster's metadata watch on Secrets map cert-manager's writes back to the Cluster.
		spec["secretTemplate"] = map[string]any{"labels": map[string]any{labelCluster: c.Name}}
		spec["dnsNames"] = toAnySlice(req.dnsNames)
		spec["usages"] = toAnySlice(req.usages)
		spec["issuerRef"] = map[string]any{"name": ref.Name, "kind": kind, "group": group}
		spec["privateKey"] = map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"}
		u.Object["spec"] = spec
		if after, _ := json.Marshal(spec); u.GetResourceVersion() == "" || !bytes.Equal(before, after) {
			// A new or changed spec asks cert-manager for a new issuance: the wait for it starts now.
			ann := u.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[annotationIssuanceRequested] = time.Now().UTC().Format(time.RFC3339)
			u.SetAnnotations(ann)
		}
		return controllerutil.SetControllerReference(c, u, r.Scheme())
	}); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("cert-manager's Certificate API (cert-manager.io/v1) is not served: install cert-manager or remove issuerRef: %w", err)
		}
		return nil, fmt.Errorf("cert-manager Certificate %s: %w", req.name, err)
	}
	s := &corev1.Secret{}
	err := r.APIReader.Get(ctx, ktypes.NamespacedName{Namespace: c.Namespace, Name: req.secretName}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	why, final := fmt.Sprintf("waiting for cert-manager to write Secret %s for Certificate %s", req.secretName, req.name), false
	if err == nil {
		why, final = usableSecret(s, req)
	}
	if why == "" {
		return &issuedCert{secretName: req.secretName, certPEM: s.Data[corev1.TLSCertKey], keyPEM: s.Data[corev1.TLSPrivateKeyKey],
			caPEM: s.Data[caCertKey]}, nil
	}
	if final {
		return nil, errors.New(why)
	}
	if msg := certificateNotReady(u); msg != "" {
		why += "; cert-manager: " + msg
	}
	if waited := time.Since(certificateWaitStart(u)); waited > r.certificateWait() {
		return nil, &certPending{reason: gnmicv1alpha1.ReasonCertificateTimedOut, retry: time.Minute,
			message: fmt.Sprintf("no usable certificate after %s: %s", waited.Truncate(time.Second), why)}
	}
	return nil, &certPending{reason: gnmicv1alpha1.ReasonCertificatePending, message: why, retry: certificatePoll}
}

// usableSecret says why s does not hold a certificate for req yet, or "" when it does; final when waiting will not
// help (the issuer writes no ca.crt, and the operator trusts exactly that CA).
func usableSecret(s *corev1.Secret, req certRequest) (why string, final bool) {
	certPEM, keyPEM := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return fmt.Sprintf("Secret %s has no tls.crt/tls.key yet", s.Name), false
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Sprintf("Secret %s: %v", s.Name, err), false
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return fmt.Sprintf("Secret %s: %v", s.Name, err), false
	}
	for _, n := range req.dnsNames {
		if !slices.Contains(leaf.DNSNames, n) {
			return fmt.Sprintf("Secret %s holds a certificate without %s; waiting for cert-manager to reissue it", s.Name, n), false
		}
	}
	if req.needCA && len(s.Data[caCertKey]) == 0 {
		return fmt.Sprintf("Secret %s has no ca.crt: use an issuer that writes it (CA, SelfSigned, Vault); the operator trusts exactly that CA", s.Name), true
	}
	return "", false
}

// certificateNotReady is the message of a Certificate's Ready condition when it is not True.
func certificateNotReady(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if !ok || cond["type"] != "Ready" || cond["status"] == "True" {
			continue
		}
		msg, _ := cond["message"].(string)
		reason, _ := cond["reason"].(string)
		return fmt.Sprintf("Ready=%v (%s) %s", cond["status"], reason, msg)
	}
	return ""
}

// certificateWaitStart is when the wait for the Certificate's current issuance began: the latest of its creation,
// the operator's last change of its spec (annotationIssuanceRequested), the Issuing=True transition and the
// Ready=False transition. Each of them starts a wait, and a stale one is always earlier than the one that started
// the current wait, so the latest is right. cert-manager's conditions alone are not enough: right after the
// operator changed the dnsNames, the Certificate still says Ready=True from the last issuance (cert-manager has not
// looked yet), and creationTimestamp alone made every re-issue of an older Certificate time out at once. The
// annotation alone misses re-issues the operator did not cause (the Secret deleted), which cert-manager's
// conditions show. Transition times, not observation times, so re-reading the status never restarts the wait.
func certificateWaitStart(u *unstructured.Unstructured) time.Time {
	start := u.GetCreationTimestamp().Time
	later := func(s string) {
		if at, err := time.Parse(time.RFC3339, s); err == nil && at.After(start) {
			start = at
		}
	}
	later(u.GetAnnotations()[annotationIssuanceRequested])
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		at, _ := cond["lastTransitionTime"].(string)
		if (cond["type"] == "Issuing" && cond["status"] == "True") || (cond["type"] == "Ready" && cond["status"] == "False") {
			later(at)
		}
	}
	return start
}

func toAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
