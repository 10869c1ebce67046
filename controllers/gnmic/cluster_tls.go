package gnmic

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

const (
	// apiTLSMountPath is where the collectors read their REST API certificate.
	apiTLSMountPath = "/etc/gnmic/tls"
	// caCertKey is the CA's key in a certificate Secret, as cert-manager writes it.
	caCertKey = "ca.crt"
)

// leafKind is one certificate the collectors may need: the REST API's (spec.api.tls), the gRPC tunnel server's
// (spec.grpcTunnel.tls) or the client certificate they present to devices (spec.clientTLS).
type leafKind struct {
	purpose   string
	what      string
	mountPath string
	usage     x509.ExtKeyUsage
	// cmUsages are the same usages in cert-manager's names.
	cmUsages []string
	// needCA: the operator trusts the issuing CA (the REST API), so the Secret must carry ca.crt.
	needCA bool
	// readPerDial: gNMIc reads the files on every connection it opens (the client certificate it presents to
	// devices: TargetConfig.NewTLSConfig, v0.47), so a renewal reaches it through the mounted Secret without a roll.
	readPerDial bool
}

var (
	apiLeaf = leafKind{purpose: "api", what: "REST API", mountPath: apiTLSMountPath, usage: x509.ExtKeyUsageServerAuth,
		cmUsages: []string{"server auth", "digital signature"}, needCA: true}
	tunnelLeaf = leafKind{purpose: "tunnel", what: "gRPC tunnel server", mountPath: "/etc/gnmic/tunnel-tls",
		usage: x509.ExtKeyUsageServerAuth, cmUsages: []string{"server auth", "digital signature"}}
	clientLeaf = leafKind{purpose: "client", what: "client", mountPath: "/etc/gnmic/client-tls",
		usage: x509.ExtKeyUsageClientAuth, cmUsages: []string{"client auth", "digital signature"}, readPerDial: true}
	// operatorClientLeaf is the client certificate the operator presents to the collectors' REST API, from the
	// issuer of the API's certificate (whose CA the collectors verify clients against). It is not mounted into
	// the collectors.
	operatorClientLeaf = leafKind{purpose: "operator-client", what: "operator's API client",
		usage: x509.ExtKeyUsageClientAuth, cmUsages: []string{"client auth", "digital signature"}}
)

// operatorClientName is the DNS name in the operator's client certificate (the collectors check only its CA).
const operatorClientName = "quartet-operator"

// annotation carries the certificate's fingerprint on the pods: a renewal rolls them (the StatefulSet's rolling
// update, one pod at a time), since gNMIc reads the REST API's and the tunnel server's certificate files once at
// start. Not for readPerDial certificates.
func (k leafKind) annotation() string { return "operator.gnmic.dev/" + k.purpose + "-cert" }

// spec is the Cluster's TLS request for this certificate; nil when not asked for.
func (k leafKind) spec(c *gnmicv1alpha1.Cluster) *gnmicv1alpha1.ClusterTLS {
	switch k.purpose {
	case "api", "operator-client":
		// TLS is the default: an unset api.tls is {} (operator-issued) unless the Cluster opts out.
		if c.Spec.API == nil {
			return &gnmicv1alpha1.ClusterTLS{}
		}
		if c.Spec.API.PlainHTTP {
			return nil
		}
		if c.Spec.API.TLS == nil {
			return &gnmicv1alpha1.ClusterTLS{}
		}
		return c.Spec.API.TLS
	case "tunnel":
		if c.Spec.GRPCTunnel != nil {
			return c.Spec.GRPCTunnel.TLS
		}
	case "client":
		return c.Spec.ClientTLS
	}
	return nil
}

// secretName of an operator-issued certificate; certificateName of cert-manager's, whose Secret is
// certificateName + "-tls" (another name, so switching between the two never has both write one Secret).
func (k leafKind) secretName(c *gnmicv1alpha1.Cluster) string {
	return clusterResourceName(c) + "-" + k.purpose + "-tls"
}

func (k leafKind) certificateName(c *gnmicv1alpha1.Cluster) string {
	return clusterResourceName(c) + "-" + k.purpose + "-cert"
}

// file is the path of one key of the certificate's Secret inside the collectors.
func (k leafKind) file(key string) string { return k.mountPath + "/" + key }

// leafTLS is the state of one of a Cluster's certificates.
type leafTLS struct {
	kind leafKind
	// secretName is the kubernetes.io/tls Secret mounted into the collectors.
	secretName string
	// caPEM is the CA that issued it (the Secret's ca.crt).
	caPEM       []byte
	fingerprint string
	// renewAt is when the operator renews an operator-issued certificate; zero when cert-manager renews it.
	renewAt time.Time
	// source names who issued it, for the condition message.
	source string
	// pair is the certificate and key, kept only for the operator's own client certificate.
	pair *tls.Certificate
}

// clusterCerts are the certificates a Cluster asked for; nil fields were not asked for. operator is the
// operator's client certificate for the REST API (with api).
type clusterCerts struct {
	api, tunnel, client *leafTLS
	operator            *leafTLS
}

func (t *clusterCerts) all() []*leafTLS {
	if t == nil {
		return nil
	}
	return slices.DeleteFunc([]*leafTLS{t.api, t.tunnel, t.client}, func(l *leafTLS) bool { return l == nil })
}

// issued are all() and the operator's client certificate.
func (t *clusterCerts) issued() []*leafTLS {
	if t == nil || t.operator == nil {
		return t.all()
	}
	return append(t.all(), t.operator)
}

// renewAt is the earliest renewal the operator itself has to make; zero when none.
func (t *clusterCerts) renewAt() time.Time {
	var at time.Time
	for _, l := range t.issued() {
		if !l.renewAt.IsZero() && (at.IsZero() || l.renewAt.Before(at)) {
			at = l.renewAt
		}
	}
	return at
}

func apiTLSEnabled(c *gnmicv1alpha1.Cluster) bool { return apiLeaf.spec(c) != nil }

func apiCASecretName(c *gnmicv1alpha1.Cluster) string { return clusterResourceName(c) + "-api-ca" }

// certificates runs the TLS step of a reconcile: it keeps every certificate the Cluster asks for and sets
// CertificatesReady. wait > 0 means a certificate is not issued yet: nothing is deployed or pushed, and the Cluster
// is looked at again after wait.
func (r *ClusterReconciler) certificates(ctx context.Context, c *gnmicv1alpha1.Cluster) (t *clusterCerts, wait time.Duration, err error) {
	t, err = r.ensureCertificates(ctx, c)
	r.setCertificatesCondition(c, t, err)
	var pending *certPending
	if errors.As(err, &pending) {
		return nil, pending.retry, nil
	}
	return t, 0, err
}

// podDNSNames are the names the collectors answer to: every pod of the headless Service, short and fully
// qualified (the operator calls the fully qualified one).
func (r *ClusterReconciler) podDNSNames(c *gnmicv1alpha1.Cluster) []string {
	svc := fmt.Sprintf("%s.%s.svc", clusterResourceName(c), c.Namespace)
	return []string{"*." + svc, "*." + svc + "." + r.clusterDomain()}
}

// dnsNames of a certificate: the tunnel server's are its Service's names (devices dial the Service), the others
// the pods'.
func (r *ClusterReconciler) dnsNames(c *gnmicv1alpha1.Cluster, k leafKind) []string {
	if k.purpose == "tunnel" {
		svc := fmt.Sprintf("%s-tunnel.%s.svc", clusterResourceName(c), c.Namespace)
		return []string{svc, svc + "." + r.clusterDomain()}
	}
	if k.purpose == "operator-client" {
		return []string{operatorClientName}
	}
	return r.podDNSNames(c)
}

func (r *ClusterReconciler) clusterDomain() string {
	if r.ClusterDomain == "" {
		return "cluster.local"
	}
	return r.ClusterDomain
}

// ensureCertificates keeps each certificate the Cluster asks for: from cert-manager when its spec names an
// issuerRef, else from the per-Cluster CA (created on first need). nil when none is asked for.
func (r *ClusterReconciler) ensureCertificates(ctx context.Context, c *gnmicv1alpha1.Cluster) (*clusterCerts, error) {
	out := &clusterCerts{}
	var ca *certs.Pair
	for _, k := range []leafKind{apiLeaf, operatorClientLeaf, tunnelLeaf, clientLeaf} {
		spec := k.spec(c)
		if spec == nil {
			continue
		}
		var leaf *leafTLS
		var err error
		if ref := spec.IssuerRef; ref != nil {
			leaf, err = r.certManagerLeaf(ctx, c, k, ref)
		} else {
			if ca == nil {
				if ca, err = r.ensureCA(ctx, c); err != nil {
					return nil, err
				}
			}
			leaf, err = r.operatorLeaf(ctx, c, k, *ca)
		}
		if err != nil {
			return nil, err
		}
		switch k.purpose {
		case "api":
			out.api = leaf
		case "tunnel":
			out.tunnel = leaf
		case "client":
			out.client = leaf
		case "operator-client":
			out.operator = leaf
		}
	}
	if err := r.matchOperatorCA(ctx, c, out); err != nil {
		return nil, err
	}
	if len(out.all()) == 0 {
		return nil, nil
	}
	return out, nil
}

// matchOperatorCA asks cert-manager for a new operator client certificate when the issuer's CA changed and the
// API's certificate was renewed first: the collectors verify clients against the API Secret's ca.crt, so a client
// certificate of another CA would be refused by every restarted pod until cert-manager's own renewal, weeks away.
// cert-manager re-issues a Certificate whose Secret holds no certificate, so the operator empties its tls.crt and
// tls.key (it may update Secrets, not delete them); meanwhile the Cluster waits as for any pending certificate. (Operator-issued
// certificates need none of this: a new CA re-issues every leaf at once.)
func (r *ClusterReconciler) matchOperatorCA(ctx context.Context, c *gnmicv1alpha1.Cluster, out *clusterCerts) error {
	if out.api == nil || out.operator == nil || !out.operator.renewAt.IsZero() ||
		len(out.operator.caPEM) == 0 || bytes.Equal(out.operator.caPEM, out.api.caPEM) {
		return nil
	}
	stale := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: out.operator.secretName}, stale); err != nil {
		return fmt.Errorf("asking for a new %s certificate: %w", operatorClientLeaf.what, err)
	}
	// A kubernetes.io/tls Secret must keep both keys; empty, they hold no certificate.
	stale.Data[corev1.TLSCertKey], stale.Data[corev1.TLSPrivateKeyKey] = []byte{}, []byte{}
	if err := r.Update(ctx, stale); err != nil {
		return fmt.Errorf("asking for a new %s certificate: %w", operatorClientLeaf.what, err)
	}
	return &certPending{reason: gnmicv1alpha1.ReasonCertificatePending, retry: 5 * time.Second,
		message: fmt.Sprintf("the %s certificate in Secret %s is from another CA than the REST API's; "+
			"waiting for cert-manager to issue it again", operatorClientLeaf.what, out.operator.secretName)}
}

func (r *ClusterReconciler) certManagerLeaf(ctx context.Context, c *gnmicv1alpha1.Cluster, k leafKind, ref *gnmicv1alpha1.IssuerReference) (*leafTLS, error) {
	got, err := r.certManagerCertificate(ctx, c, ref, certRequest{name: k.certificateName(c), secretName: k.certificateName(c) + "-tls",
		dnsNames: r.dnsNames(c, k), usages: k.cmUsages, needCA: k.needCA})
	if err != nil {
		return nil, err
	}
	leaf := &leafTLS{kind: k, secretName: got.secretName, caPEM: got.caPEM, fingerprint: certs.Fingerprint(got.certPEM),
		source: fmt.Sprintf("cert-manager (%s %s)", issuerKind(ref), ref.Name)}
	return leaf, keepPair(leaf, got.certPEM, got.keyPEM)
}

// ensureCA keeps the per-Cluster CA in a Secret owned by the Cluster, issuing a new one when it is missing,
// damaged or two thirds through its lifetime.
func (r *ClusterReconciler) ensureCA(ctx context.Context, c *gnmicv1alpha1.Cluster) (*certs.Pair, error) {
	now := time.Now()
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: apiCASecretName(c)}}
	var ca certs.Pair
	var issueErr error
	if err := r.createOrUpdate(ctx, c, caSecret, func() {
		ca = certs.Pair{CertPEM: caSecret.Data[corev1.TLSCertKey], KeyPEM: caSecret.Data[corev1.TLSPrivateKeyKey]}
		if certs.CAValid(ca, now) {
			return
		}
		if ca, issueErr = certs.NewCA(fmt.Sprintf("%s/%s collectors", c.Namespace, c.Name), now); issueErr == nil {
			caSecret.Type = corev1.SecretTypeOpaque
			caSecret.Data = map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM}
		}
	}); err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", caSecret.Name, err)
	}
	if issueErr != nil {
		return nil, fmt.Errorf("issuing the CA: %w", issueErr)
	}
	return &ca, nil
}

// operatorLeaf keeps one certificate from the per-Cluster CA in a kubernetes.io/tls Secret owned by the Cluster
// (tls.crt, tls.key, ca.crt as cert-manager writes them), issuing a new one when it is missing, damaged, renamed,
// from another CA or two thirds through its lifetime.
func (r *ClusterReconciler) operatorLeaf(ctx context.Context, c *gnmicv1alpha1.Cluster, k leafKind, ca certs.Pair) (*leafTLS, error) {
	now := time.Now()
	names := r.dnsNames(c, k)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: k.secretName(c)}}
	var leaf certs.Pair
	var issueErr error
	if err := r.createOrUpdate(ctx, c, secret, func() {
		leaf = certs.Pair{CertPEM: secret.Data[corev1.TLSCertKey], KeyPEM: secret.Data[corev1.TLSPrivateKeyKey]}
		if certs.LeafValid(ca, leaf, names, k.usage, now) && slices.Equal(secret.Data[caCertKey], ca.CertPEM) {
			return
		}
		if leaf, issueErr = certs.Issue(ca, names, k.usage, now); issueErr == nil {
			secret.Type = corev1.SecretTypeTLS
			secret.Data = map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM, caCertKey: ca.CertPEM}
		}
	}); err != nil {
		return nil, fmt.Errorf("%s certificate Secret %s: %w", k.what, secret.Name, err)
	}
	if issueErr != nil {
		return nil, fmt.Errorf("issuing the %s certificate: %w", k.what, issueErr)
	}
	renewAt, err := certs.RenewAt(leaf.CertPEM)
	if err != nil {
		return nil, err
	}
	out := &leafTLS{kind: k, secretName: secret.Name, caPEM: ca.CertPEM, fingerprint: certs.Fingerprint(leaf.CertPEM),
		renewAt: renewAt, source: "the Cluster's CA"}
	return out, keepPair(out, leaf.CertPEM, leaf.KeyPEM)
}

// keepPair keeps the certificate and key of the operator's client certificate (only that one: the collectors'
// keys stay in their Secrets).
func keepPair(l *leafTLS, certPEM, keyPEM []byte) error {
	if l.kind.purpose != operatorClientLeaf.purpose {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the %s certificate in Secret %s: %w", l.kind.what, l.secretName, err)
	}
	l.pair = &pair
	return nil
}

// trustCollectors makes the collector client verify each pod against the CA of the REST API certificate alone,
// under the pod's DNS name (also when the URL was overridden for tests).
func (r *ClusterReconciler) trustCollectors(t *clusterCerts, c *gnmicv1alpha1.Cluster, urls map[int]string) error {
	if t == nil || t.api == nil {
		r.Collectors.Forget(c.Namespace + "/" + c.Name)
		return nil
	}
	for i, u := range urls {
		name := fmt.Sprintf("%s.%s.%s.svc.%s", podName(c, i), clusterResourceName(c), c.Namespace, r.clusterDomain())
		var clientCert *tls.Certificate
		if t.operator != nil {
			clientCert = t.operator.pair
		}
		if err := r.Collectors.TrustMutual(c.Namespace+"/"+c.Name, u, name, t.api.caPEM, clientCert); err != nil {
			return err
		}
	}
	return nil
}

// withCertificates mounts each certificate's Secret at its path with its fingerprint on the pods. With TLS on the
// REST API the readiness probe becomes a TCP check: the API requires a client certificate of the Cluster's CA,
// which the kubelet does not have (the operator's own calls show whether the API answers).
func withCertificates(tpl *corev1.PodTemplateSpec, t *clusterCerts) {
	for _, l := range t.all() {
		if !l.kind.readPerDial {
			tpl.Annotations[l.kind.annotation()] = l.fingerprint
		}
		volume := l.kind.purpose + "-tls"
		tpl.Spec.Volumes = append(tpl.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: l.secretName}}})
		ctr := &tpl.Spec.Containers[0]
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: l.kind.mountPath, ReadOnly: true})
		if l.kind.purpose == "api" {
			ctr.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: ctr.ReadinessProbe.HTTPGet.Port}}
		}
	}
}

// clientCertFiles are the Cluster's client certificate files for the plan, when spec.clientTLS asks for one.
func clientCertFiles(c *gnmicv1alpha1.Cluster) *plan.ClientCertFiles {
	if clientLeaf.spec(c) == nil {
		return nil
	}
	return &plan.ClientCertFiles{CertFile: clientLeaf.file(corev1.TLSCertKey), KeyFile: clientLeaf.file(corev1.TLSPrivateKeyKey)}
}

// setCertificatesCondition reports the Cluster's certificates.
func (r *ClusterReconciler) setCertificatesCondition(c *gnmicv1alpha1.Cluster, t *clusterCerts, err error) {
	cond := metav1.Condition{Type: gnmicv1alpha1.ClusterConditionCertificatesReady, ObservedGeneration: c.Generation}
	var pending *certPending
	switch {
	case errors.As(err, &pending):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, pending.reason, pending.message
	case err != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, gnmicv1alpha1.ReasonCertificatesFailed, err.Error()
	case t != nil:
		var parts []string
		for _, l := range t.issued() {
			renew := "renewed by cert-manager"
			if !l.renewAt.IsZero() {
				renew = "renewed after " + l.renewAt.UTC().Format(time.RFC3339)
			}
			parts = append(parts, fmt.Sprintf("%s certificate from %s (Secret %s), %s", l.kind.what, l.source, l.secretName, renew))
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, gnmicv1alpha1.ReasonCertificatesIssued, strings.Join(parts, "; ")
	default:
		meta.RemoveStatusCondition(&c.Status.Conditions, gnmicv1alpha1.ClusterConditionCertificatesReady)
		return
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

func issuerKind(ref *gnmicv1alpha1.IssuerReference) string {
	if ref.Kind == "" {
		return "Issuer"
	}
	return ref.Kind
}
