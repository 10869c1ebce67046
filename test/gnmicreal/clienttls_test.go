package gnmicreal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	fakegnmi "github.com/openconfig/gnmi/testing/fake/gnmi"
	fpb "github.com/openconfig/gnmi/testing/fake/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

// With Cluster.spec.clientTLS the operator puts the Cluster's client certificate files in gNMIc's tls-cert and
// tls-key of each TLS target: the real gNMIc reads them and presents the certificate to a device that requires
// and verifies client certificates from the Cluster's CA, and the subscription starts.
func TestRealGNMIcPresentsTheClusterClientCertificate(t *testing.T) {
	g := NewWithT(t)
	bin := gnmicBinary(t)
	now := time.Now()
	ca, err := certs.NewCA("lab/core collectors", now)
	g.Expect(err).NotTo(HaveOccurred())
	client, err := certs.Issue(ca, []string{"*.gnmic-core.lab.svc"}, x509.ExtKeyUsageClientAuth, now)
	g.Expect(err).NotTo(HaveOccurred())
	deviceCA, err := certs.NewCA("device", now)
	g.Expect(err).NotTo(HaveOccurred())
	deviceCert, err := certs.IssueServing(deviceCA, []string{"r1.lab"}, now)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	files := &plan.ClientCertFiles{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	g.Expect(os.WriteFile(files.CertFile, client.CertPEM, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(files.KeyFile, client.KeyPEM, 0o600)).To(Succeed())

	// The device asks for a client certificate and accepts only the Cluster CA's.
	kp, err := tls.X509KeyPair(deviceCert.CertPEM, deviceCert.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	pool, err := certs.Pool(ca.CertPEM)
	g.Expect(err).NotTo(HaveOccurred())
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: pool, MinVersion: tls.VersionTLS12})
	device, err := fakegnmi.New(&fpb.Config{Target: "r1", ClientType: fpb.Config_GRPC_GNMI, DisableEof: true,
		Generator: &fpb.Config_Fixed{Fixed: &fpb.FixedGenerator{}}}, []grpc.ServerOption{grpc.Creds(creds)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(device.Close)
	_, port, err := net.SplitHostPort(device.Address())
	g.Expect(err).NotTo(HaveOccurred())

	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "lab", Name: name} }
	// The device's own certificate is from a CA the test does not hand to gNMIc, hence insecureSkipVerify: what is
	// checked here is the client side.
	profile := &v1.TargetProfile{ObjectMeta: meta("default"), Spec: v1.TargetProfileSpec{
		Encoding: v1.EncodingJSONIETF, Timeout: &metav1.Duration{Duration: 5 * time.Second},
		TLS: &v1.ClientTLS{InsecureSkipVerify: true}}}
	p := plan.Build(plan.Snapshot{
		Pipelines: []v1.GnmicPipeline{{ObjectMeta: meta("p"), Spec: v1.PipelineSpec{ClusterRef: "core", Enabled: true,
			TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"ifaces"}, Outputs: v1.PipelineOutputs{OutputRefs: []string{"out"}}}}},
		Outputs: []v1.Output{{ObjectMeta: meta("out"), Spec: v1.OutputSpec{Type: v1.OutputFile,
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"file-type":"stdout"}`)}}}},
		Targets: []v1.Target{{ObjectMeta: meta("r1"), Spec: v1.TargetSpec{Address: "127.0.0.1:" + port, Profile: "default"}}},
		Subscriptions: []v1.Subscription{{ObjectMeta: meta("ifaces"), Spec: v1.SubscriptionSpec{
			Paths: []string{"/interfaces/interface/state/counters"}, Mode: "STREAM/SAMPLE",
			SampleInterval: &metav1.Duration{Duration: 10 * time.Second}}}},
		Profiles:    map[ktypes.NamespacedName]*v1.TargetProfile{{Namespace: "lab", Name: "default"}: profile},
		Credentials: map[ktypes.NamespacedName]map[string][]byte{},
		ClientCert:  files,
	})
	g.Expect(p.Config.Targets["lab/r1"].TLSCert).To(HaveValue(Equal(files.CertFile)))

	body, _, err := plan.Encode(p.ForPod([]string{"lab/r1"}))
	g.Expect(err).NotTo(HaveOccurred())
	wire := map[string]map[string]any{}
	g.Expect(json.Unmarshal(body, &wire)).To(Succeed())
	data, err := yaml.Marshal(map[string]any{"log": true, "targets": wire["targets"], "subscriptions": wire["subscriptions"],
		"outputs": wire["outputs"], "api-server": map[string]any{"address": fmt.Sprintf("127.0.0.1:%d", freePort(t))}})
	g.Expect(err).NotTo(HaveOccurred())
	cfgFile := filepath.Join(dir, "gnmic.yaml")
	g.Expect(os.WriteFile(cfgFile, data, 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	cmd := exec.CommandContext(ctx, bin, "--config", cfgFile, "subscribe")
	cmd.Stdout, cmd.Stderr = logs, logs
	g.Expect(cmd.Start()).To(Succeed())
	defer func() { cancel(); _ = cmd.Wait() }()
	g.Eventually(func(g Gomega) {
		reqs := device.Requests()
		g.Expect(reqs).NotTo(BeEmpty())
		g.Expect(reqs[0].GetSubscribe()).NotTo(BeNil())
	}).WithTimeout(60*time.Second).Should(Succeed(), "gNMIc log:\n%s", logs)
}
