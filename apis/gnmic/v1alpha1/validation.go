package v1alpha1

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateAddress checks that address is host:port with a port from 1 to 65535 and a host that is an IP address
// or a DNS name. It returns a human-readable reason, or "" when the address is valid.
func ValidateAddress(address string) string {
	const want = "must be host:port with a port from 1 to 65535, e.g. router1.example.net:57400 or [2001:db8::1]:57400"
	host, port, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return want
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return want
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	if strings.Contains(address, "[") {
		return "brackets are only allowed around an IPv6 address"
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(errs) > 0 {
		return "host must be an IP address or a DNS name: " + strings.Join(errs, "; ")
	}
	return ""
}

// ValidateTarget returns every problem with a Target's spec, each naming its field.
func ValidateTarget(t *Target) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if t.Spec.Address == "" {
		errs = append(errs, field.Required(spec.Child("address"), "the device's gNMI endpoint as host:port"))
	} else if reason := ValidateAddress(t.Spec.Address); reason != "" {
		errs = append(errs, field.Invalid(spec.Child("address"), t.Spec.Address, reason))
	}
	if t.Spec.Profile == "" {
		errs = append(errs, field.Required(spec.Child("profile"), "the name of a TargetProfile in the same namespace"))
	} else if msgs := validation.IsDNS1123Subdomain(t.Spec.Profile); len(msgs) > 0 {
		errs = append(errs, field.Invalid(spec.Child("profile"), t.Spec.Profile, strings.Join(msgs, "; ")))
	}
	return errs
}

var tlsVersionOrder = map[TLSVersion]int{"1.0": 0, "1.1": 1, "1.2": 2, "1.3": 3}

// knownCipherSuites lists every cipher suite name Go knows, secure or not: gNMIc passes the names to Go's TLS
// stack, so any other name would fail on the collector instead of at admission.
var knownCipherSuites = func() map[string]bool {
	names := map[string]bool{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		names[cs.Name] = true
	}
	return names
}()

// ValidateTargetProfile returns every problem with a TargetProfile's spec, each naming its field.
func ValidateTargetProfile(p *TargetProfile) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, positiveDuration(spec.Child("timeout"), p.Spec.Timeout)...)
	if p.Spec.RetryTimer != nil && p.Spec.RetryTimer.Duration < 2*time.Second {
		errs = append(errs, field.Invalid(spec.Child("retryTimer"), p.Spec.RetryTimer.Duration.String(),
			"must be at least "+MinimumRetryTimer))
	}
	errs = append(errs, positiveDuration(spec.Child("tcpKeepAlive"), p.Spec.TCPKeepAlive)...)
	if ka := p.Spec.GRPCKeepAlive; ka != nil {
		errs = append(errs, positiveDuration(spec.Child("grpcKeepAlive", "time"), ka.Time)...)
		errs = append(errs, positiveDuration(spec.Child("grpcKeepAlive", "timeout"), ka.Timeout)...)
	}
	if p.Spec.Encoding != "" {
		switch p.Spec.Encoding {
		case EncodingJSON, EncodingBytes, EncodingProto, EncodingASCII, EncodingJSONIETF:
		default:
			errs = append(errs, field.NotSupported(spec.Child("encoding"), p.Spec.Encoding,
				[]Encoding{EncodingJSON, EncodingBytes, EncodingProto, EncodingASCII, EncodingJSONIETF}))
		}
	}
	if p.Spec.Proxy != "" {
		if reason := validateProxy(p.Spec.Proxy); reason != "" {
			errs = append(errs, field.Invalid(spec.Child("proxy"), p.Spec.Proxy, reason))
		}
	}
	if t := p.Spec.TLS; t != nil {
		errs = append(errs, validateClientTLS(spec.Child("tls"), t)...)
	}
	for k, v := range p.Spec.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(spec.Child("labels").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(spec.Child("labels").Key(k), v, msg))
		}
	}
	if ref := p.Spec.CredentialsRef; ref != nil {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(spec.Child("credentialsRef", "name"), ref.Name, msg))
		}
	}
	return errs
}

func positiveDuration(path *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration <= 0 {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must be greater than zero")}
	}
	return nil
}

func validateProxy(proxy string) string {
	u, err := url.Parse(proxy)
	if err != nil || u.Scheme != "socks5" || u.Host == "" || u.Path != "" {
		return "must be socks5://host:port"
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return "must be socks5://host:port"
	}
	return ""
}

func validateClientTLS(path *field.Path, t *ClientTLS) field.ErrorList {
	var errs field.ErrorList
	for _, v := range []struct {
		name string
		val  TLSVersion
	}{{"minVersion", t.MinVersion}, {"maxVersion", t.MaxVersion}} {
		if _, ok := tlsVersionOrder[v.val]; v.val != "" && !ok {
			errs = append(errs, field.NotSupported(path.Child(v.name), v.val, []string{"1.0", "1.1", "1.2", "1.3"}))
		}
	}
	minV, minOK := tlsVersionOrder[t.MinVersion]
	maxV, maxOK := tlsVersionOrder[t.MaxVersion]
	if minOK && maxOK && maxV < minV {
		errs = append(errs, field.Invalid(path.Child("maxVersion"), t.MaxVersion,
			fmt.Sprintf("must not be lower than minVersion %q", t.MinVersion)))
	}
	for i, cs := range t.CipherSuites {
		if !knownCipherSuites[cs] {
			errs = append(errs, field.Invalid(path.Child("cipherSuites").Index(i), cs,
				"unknown cipher suite; use a Go/IANA name such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"))
		}
	}
	if b := t.CABundle; b != nil {
		bp := path.Child("caBundle")
		switch {
		case (b.SecretRef == nil) == (b.ConfigMapRef == nil):
			errs = append(errs, field.Required(bp, "exactly one of secretRef and configMapRef"))
		case b.SecretRef != nil:
			errs = append(errs, validKeyRef(bp.Child("secretRef"), b.SecretRef)...)
		default:
			errs = append(errs, validKeyRef(bp.Child("configMapRef"), b.ConfigMapRef)...)
		}
	}
	if r := t.ClientCertRef; r != nil {
		for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
			errs = append(errs, field.Invalid(path.Child("clientCertRef", "name"), r.Name, msg))
		}
	}
	return errs
}

func validKeyRef(path *field.Path, r *KeyReference) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), r.Name, msg))
	}
	if r.Key != "" {
		for _, msg := range validation.IsConfigMapKey(r.Key) {
			errs = append(errs, field.Invalid(path.Child("key"), r.Key, msg))
		}
	}
	return errs
}

// TargetProfileWarnings are admitted-but-risky settings of a TargetProfile, for admission warnings.
func TargetProfileWarnings(p *TargetProfile) []string {
	if t := p.Spec.TLS; t != nil && t.InsecureSkipVerify {
		return []string{"spec.tls.insecureSkipVerify: device certificates are not verified; anyone on the path can " +
			"impersonate the devices and read the credentials sent to them. Prefer spec.tls.caBundle"}
	}
	return nil
}
