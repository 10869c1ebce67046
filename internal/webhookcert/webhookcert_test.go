package webhookcert

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

var (
	now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// servingRenewal is when RenewAt says a serving certificate issued at now is due (two thirds of its life).
	servingRenewal = certs.ServingValidity * 2 / 3
	dnsNames       = Config{Service: "webhook-service", Namespace: "system"}.DNSNames()
)

func mustIssue(t *testing.T, data map[string][]byte, action Action, names []string, at time.Time) map[string][]byte {
	t.Helper()
	out, err := issue(data, action, "test-ca", names, at)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDecide(t *testing.T) {
	fresh := mustIssue(t, nil, Regenerate, dnsNames, now)
	other := mustIssue(t, nil, Regenerate, dnsNames, now)
	with := func(key string, value []byte) map[string][]byte {
		data := map[string][]byte{}
		for k, v := range fresh {
			data[k] = v
		}
		data[key] = value
		return data
	}
	for _, tc := range []struct {
		name string
		data map[string][]byte
		at   time.Time
		want Action
	}{
		{"empty Secret", nil, now, Regenerate},
		{"fresh certificates", fresh, now, Reuse},
		{"just before the serving certificate's renewal", fresh, now.Add(servingRenewal - time.Hour), Reuse},
		{"serving certificate due", fresh, now.Add(servingRenewal + time.Hour), RenewServing},
		{"CA due", fresh, now.Add(certs.CAValidity * 2 / 3), Regenerate},
		{"serving certificate of another CA", with(KeyCert, other[KeyCert]), now, RenewServing},
		{"serving key of another certificate", with(KeyKey, other[KeyKey]), now, RenewServing},
		{"serving certificate for another Service", mustIssue(t, fresh, RenewServing, []string{"elsewhere.system.svc"}, now), now, RenewServing},
		{"CA key missing (a cert-manager Secret)", with(KeyCAKey, nil), now, Regenerate},
		{"CA garbage", with(KeyCACert, []byte("not PEM")), now, Regenerate},
		{"serving certificate missing", with(KeyCert, nil), now, RenewServing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Decide(tc.data, dnsNames, tc.at)).To(Equal(tc.want))
		})
	}
}

func TestRenewServingKeepsTheCA(t *testing.T) {
	g := NewWithT(t)
	fresh := mustIssue(t, nil, Regenerate, dnsNames, now)
	later := now.Add(servingRenewal + time.Hour)
	renewed := mustIssue(t, fresh, RenewServing, dnsNames, later)
	g.Expect(renewed[KeyCACert]).To(Equal(fresh[KeyCACert]), "the caBundle the API server trusts stays valid")
	g.Expect(renewed[KeyCert]).NotTo(Equal(fresh[KeyCert]))
	g.Expect(Decide(renewed, dnsNames, later)).To(Equal(Reuse))
}

func TestConfigValidateNamesTheMissingFlag(t *testing.T) {
	g := NewWithT(t)
	full := Config{SecretName: "s", Namespace: "ns", Service: "svc", CertDir: "/d"}
	g.Expect(full.Validate()).To(Succeed())
	noService := full
	noService.Service = ""
	g.Expect(noService.Validate()).To(MatchError(ContainSubstring("--webhook-service")))
	noNamespace := full
	noNamespace.Namespace = ""
	g.Expect(noNamespace.Validate()).To(MatchError(ContainSubstring("POD_NAMESPACE")))
}

func TestWriteCertDirReplacesBothFiles(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "serving-certs")
	first := mustIssue(t, nil, Regenerate, dnsNames, now)
	g.Expect(writeCertDir(dir, first)).To(Succeed())
	second := mustIssue(t, first, RenewServing, dnsNames, now)
	g.Expect(writeCertDir(dir, second)).To(Succeed())
	for _, key := range []string{KeyCert, KeyKey} {
		got, err := os.ReadFile(filepath.Join(dir, key))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(second[key]))
	}
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2), "no temporary file left behind")
}

// FuzzDecide feeds arbitrary Secret contents: Decide never panics, and whatever it keeps is really usable.
func FuzzDecide(f *testing.F) {
	fresh, err := issue(nil, Regenerate, "test-ca", dnsNames, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fresh[KeyCACert], fresh[KeyCAKey], fresh[KeyCert], fresh[KeyKey])
	f.Add([]byte("x"), []byte{}, fresh[KeyCert], fresh[KeyKey])
	f.Fuzz(func(t *testing.T, caCert, caKey, cert, key []byte) {
		data := map[string][]byte{KeyCACert: caCert, KeyCAKey: caKey, KeyCert: cert, KeyKey: key}
		action := Decide(data, dnsNames, now)
		ca := certs.Pair{CertPEM: caCert, KeyPEM: caKey}
		if action == Reuse && !certs.ServingValid(ca, certs.Pair{CertPEM: cert, KeyPEM: key}, dnsNames, now) {
			t.Fatal("reused a serving certificate that is not valid")
		}
		if action != Regenerate && !certs.CAValid(ca, now) {
			t.Fatal("kept a CA that is not valid")
		}
	})
}
