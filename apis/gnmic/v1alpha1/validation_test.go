package v1alpha1

import (
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateAddress(t *testing.T) {
	for address, wantOK := range map[string]bool{
		"router1:57400":               true,
		"router1.lab.example.net:1":   true,
		"Router1.Lab:65535":           true,
		"192.0.2.10:57400":            true,
		"[2001:db8::1]:57400":         true,
		"router1":                     false,
		"router1:":                    false,
		"router1:0":                   false,
		"router1:65536":               false,
		"router1:+80":                 false,
		"router1:057400":              false,
		":57400":                      false,
		"2001:db8::1:57400":           false,
		"[router1]:57400":             false,
		"router_1:57400":              false,
		"-router:57400":               false,
		"router1:57400:1":             false,
		"":                            false,
		"http://router1:57400":        false,
		"router1.example.net:57400/x": false,
	} {
		t.Run(address, func(t *testing.T) {
			reason := ValidateAddress(address)
			if wantOK {
				NewWithT(t).Expect(reason).To(BeEmpty())
			} else {
				NewWithT(t).Expect(reason).NotTo(BeEmpty())
			}
		})
	}
}

func TestValidateTargetNamesFields(t *testing.T) {
	g := NewWithT(t)
	errs := ValidateTarget(&Target{Spec: TargetSpec{}})
	g.Expect(errs.ToAggregate().Error()).To(And(ContainSubstring("spec.address: Required value"), ContainSubstring("spec.profile: Required value")))
	g.Expect(ValidateTarget(&Target{Spec: TargetSpec{Address: "r1:57400", Profile: "default"}})).To(BeEmpty())
}

func TestValidateTargetProfile(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			panic(err)
		}
		return &metav1.Duration{Duration: v}
	}
	for name, tc := range map[string]struct {
		spec      TargetProfileSpec
		wantField string // "" means valid
	}{
		"empty":              {TargetProfileSpec{}, ""},
		"full":               {TargetProfileSpec{Timeout: d("10s"), RetryTimer: d("2s"), Encoding: EncodingJSONIETF, Proxy: "socks5://proxy:1080", TLS: &ClientTLS{MinVersion: "1.2", MaxVersion: "1.3", CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}}, GRPCKeepAlive: &GRPCKeepAlive{Time: d("30s"), Timeout: d("5s")}, Labels: map[string]string{"site": "lab"}, CredentialsRef: &SecretReference{Name: "creds"}}, ""},
		"retry too short":    {TargetProfileSpec{RetryTimer: d("1999ms")}, "spec.retryTimer"},
		"zero timeout":       {TargetProfileSpec{Timeout: d("0s")}, "spec.timeout"},
		"negative tcp ka":    {TargetProfileSpec{TCPKeepAlive: d("-1s")}, "spec.tcpKeepAlive"},
		"zero grpc timeout":  {TargetProfileSpec{GRPCKeepAlive: &GRPCKeepAlive{Timeout: d("0s")}}, "spec.grpcKeepAlive.timeout"},
		"bad encoding":       {TargetProfileSpec{Encoding: "XML"}, "spec.encoding"},
		"proxy without port": {TargetProfileSpec{Proxy: "socks5://proxy"}, "spec.proxy"},
		"proxy wrong scheme": {TargetProfileSpec{Proxy: "http://proxy:80"}, "spec.proxy"},
		"bad tls version":    {TargetProfileSpec{TLS: &ClientTLS{MinVersion: "1.4"}}, "spec.tls.minVersion"},
		"max below min":      {TargetProfileSpec{TLS: &ClientTLS{MinVersion: "1.2", MaxVersion: "1.1"}}, "spec.tls.maxVersion"},
		"unknown cipher":     {TargetProfileSpec{TLS: &ClientTLS{CipherSuites: []string{"AES"}}}, "spec.tls.cipherSuites[0]"},
		"bad label value":    {TargetProfileSpec{Labels: map[string]string{"site": "a b"}}, "spec.labels[site]"},
		"bad secret name":    {TargetProfileSpec{CredentialsRef: &SecretReference{Name: "Creds!"}}, "spec.credentialsRef.name"},
		"ca from configmap":  {TargetProfileSpec{TLS: &ClientTLS{CABundle: &CABundleSource{ConfigMapRef: &KeyReference{Name: "ca"}}, ClientCertRef: &SecretReference{Name: "client"}}}, ""},
		"ca from secret key": {TargetProfileSpec{TLS: &ClientTLS{CABundle: &CABundleSource{SecretRef: &KeyReference{Name: "ca", Key: "bundle.pem"}}}}, ""},
		"ca from both":       {TargetProfileSpec{TLS: &ClientTLS{CABundle: &CABundleSource{SecretRef: &KeyReference{Name: "a"}, ConfigMapRef: &KeyReference{Name: "b"}}}}, "spec.tls.caBundle"},
		"ca from neither":    {TargetProfileSpec{TLS: &ClientTLS{CABundle: &CABundleSource{}}}, "spec.tls.caBundle"},
		"bad ca key":         {TargetProfileSpec{TLS: &ClientTLS{CABundle: &CABundleSource{ConfigMapRef: &KeyReference{Name: "ca", Key: "a/b"}}}}, "spec.tls.caBundle.configMapRef.key"},
		"bad client cert":    {TargetProfileSpec{TLS: &ClientTLS{ClientCertRef: &SecretReference{Name: "Client!"}}}, "spec.tls.clientCertRef.name"},
		"skip verify":        {TargetProfileSpec{TLS: &ClientTLS{InsecureSkipVerify: true}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs := ValidateTargetProfile(&TargetProfile{Spec: tc.spec})
			if tc.wantField == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).NotTo(BeEmpty())
			g.Expect(errs[0].Field).To(Equal(tc.wantField))
		})
	}
}

func TestTargetProfileWarnings(t *testing.T) {
	g := NewWithT(t)
	g.Expect(TargetProfileWarnings(&TargetProfile{Spec: TargetProfileSpec{TLS: &ClientTLS{InsecureSkipVerify: true}}})).
		To(ConsistOf(ContainSubstring("spec.tls.insecureSkipVerify")))
	g.Expect(TargetProfileWarnings(&TargetProfile{Spec: TargetProfileSpec{TLS: &ClientTLS{}}})).To(BeEmpty())
	g.Expect(TargetProfileWarnings(&TargetProfile{})).To(BeEmpty())
}

// FuzzValidateAddress checks that whatever the input, an accepted address splits into a host and a port in range.
func FuzzValidateAddress(f *testing.F) {
	for _, seed := range []string{"router1:57400", "[::1]:1", "a:0", "a:65536", ":1", "[x]:1", "a:b:c", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, address string) {
		if ValidateAddress(address) != "" {
			return
		}
		host, port, err := net.SplitHostPort(address)
		if err != nil || host == "" {
			t.Fatalf("accepted %q, which does not split: %v", address, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			t.Fatalf("accepted %q with port %q", address, port)
		}
	})
}

// FuzzValidateTargetProfile feeds arbitrary field values to the validator: it must never panic, and every error
// must name a field under spec.
func FuzzValidateTargetProfile(f *testing.F) {
	f.Add("10s", "2s", "JSON", "socks5://p:1", "1.2", "1.3", "TLS_AES_128_GCM_SHA256", "site", "lab")
	f.Add("0s", "1s", "XML", "http://p", "9", "", "x", "bad key", "bad value")
	f.Fuzz(func(t *testing.T, timeout, retry, encoding, proxy, minV, maxV, cipher, labelKey, labelValue string) {
		p := &TargetProfile{Spec: TargetProfileSpec{
			Encoding: Encoding(encoding), Proxy: proxy,
			TLS:    &ClientTLS{MinVersion: TLSVersion(minV), MaxVersion: TLSVersion(maxV), CipherSuites: []string{cipher}},
			Labels: map[string]string{labelKey: labelValue},
		}}
		if v, err := time.ParseDuration(timeout); err == nil {
			p.Spec.Timeout = &metav1.Duration{Duration: v}
		}
		if v, err := time.ParseDuration(retry); err == nil {
			p.Spec.RetryTimer = &metav1.Duration{Duration: v}
		}
		for _, e := range ValidateTargetProfile(p) {
			if len(e.Field) < 5 || e.Field[:5] != "spec." {
				t.Fatalf("error without a spec field: %v", e)
			}
		}
	})
}
