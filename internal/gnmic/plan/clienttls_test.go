package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	ktypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// With Cluster.spec.clientTLS the collectors present the Cluster's client certificate to every device reached
// over TLS (targets and tunnel-target matches) whose profile names no client certificate of its own; plaintext
// profiles and profiles with clientCertRef keep theirs. Checked on what gNMIc decodes.
func TestClusterClientCertificate(t *testing.T) {
	files := &ClientCertFiles{CertFile: "/etc/gnmic/client-tls/tls.crt", KeyFile: "/etc/gnmic/client-tls/tls.key"}
	own := &v1.SecretReference{Name: "own"}
	for name, tc := range map[string]struct {
		tls       *v1.ClientTLS
		files     *ClientCertFiles
		cert, key string
	}{
		"tls profile gets the cluster's":        {tls: &v1.ClientTLS{}, files: files, cert: files.CertFile, key: files.KeyFile},
		"own client certificate wins":           {tls: &v1.ClientTLS{ClientCertRef: own}, files: files, cert: TargetTLSDir + "/lab_p_tls.crt", key: TargetTLSDir + "/lab_p_tls.key"},
		"plaintext profile presents none":       {files: files},
		"no clientTLS: none":                    {tls: &v1.ClientTLS{}},
		"no clientTLS, own certificate is kept": {tls: &v1.ClientTLS{ClientCertRef: own}, cert: TargetTLSDir + "/lab_p_tls.crt", key: TargetTLSDir + "/lab_p_tls.key"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := wireSnapshot()
			s.CollectorImage = "ghcr.io/openconfig/gnmic:0.47.0"
			s.Profiles[ktypes.NamespacedName{Namespace: "lab", Name: "p"}].Spec.TLS = tc.tls
			s.ClientCert = tc.files
			req, _ := pushThroughGNMIc(g, s)
			for what, cfg := range map[string]struct{ cert, key *string }{
				"target":              {req.Targets["lab/r1"].TLSCert, req.Targets["lab/r1"].TLSKey},
				"tunnel-target-match": {req.TunnelTargetMatches["lab/t"].Config.TLSCert, req.TunnelTargetMatches["lab/t"].Config.TLSKey},
			} {
				if tc.cert == "" {
					g.Expect(cfg.cert).To(BeNil(), what)
					g.Expect(cfg.key).To(BeNil(), what)
					continue
				}
				g.Expect(cfg.cert).To(HaveValue(Equal(tc.cert)), what)
				g.Expect(cfg.key).To(HaveValue(Equal(tc.key)), what)
			}
		})
	}
}
