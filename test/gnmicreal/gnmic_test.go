// Package gnmicreal runs the real gNMIc v0.37.0 binary (built by `make gnmic` from the wrapper module
// hack/tools/gnmic and cached like the control plane) against the operator's generated configuration: gNMIc must
// accept the operator's target and subscription configs and reach a fake gNMI device with them.
//
// gNMIc v0.37 predates collector mode: it has POST /api/v1/config/targets but no POST for subscriptions, and a
// target added over REST only starts with POST /api/v1/targets/{id}, which cannot address the operator's
// namespace/name target names (the slash splits the route). So the device-facing half runs the operator's target
// and subscription from gNMIc's startup file (v0.37 `subscribe` needs one target there anyway), and the REST half
// posts a second operator-generated target and reads it back.
package gnmicreal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	fakegnmi "github.com/openconfig/gnmi/testing/fake/gnmi"
	fpb "github.com/openconfig/gnmi/testing/fake/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/services"
)

const gnmicVersion = "v0.37.0"

// gnmicBinary finds the cached gNMIc build; without it the test fails under CI and is skipped otherwise, naming
// the make target that builds it.
func gnmicBinary(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("GNMIC_BIN"), filepath.Join(testenv.RepoRoot(), "bin", "gnmic-"+gnmicVersion)}
	if cache, err := os.UserCacheDir(); err == nil {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			cache = x
		}
		candidates = append(candidates, filepath.Join(cache, "quartet-operator", "tools", "gnmic-"+gnmicVersion))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	services.Missing(t, "gNMIc "+gnmicVersion, errors.New("not built: run `make gnmic`"))
	return ""
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func fakeDevice(t *testing.T, name string) (*fakegnmi.Agent, string) {
	t.Helper()
	agent, err := fakegnmi.New(&fpb.Config{Target: name, ClientType: fpb.Config_GRPC_GNMI, DisableEof: true,
		Generator: &fpb.Config_Fixed{Fixed: &fpb.FixedGenerator{}}}, nil)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(agent.Close)
	_, port, err := net.SplitHostPort(agent.Address())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return agent, "127.0.0.1:" + port
}

// operatorPlan builds the plan the operator would push for two Targets on the given addresses.
func operatorPlan(addr1, addr2 string) *plan.Plan {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "lab", Name: name} }
	profile := &v1.TargetProfile{ObjectMeta: meta("default"), Spec: v1.TargetProfileSpec{
		CredentialsRef: &v1.SecretReference{Name: "creds"}, Encoding: v1.EncodingJSONIETF,
		Timeout: &metav1.Duration{Duration: 5 * time.Second}, RetryTimer: &metav1.Duration{Duration: 2 * time.Second},
		// Long enough that no ping is sent during the test; what matters is that gNMIc reads every field.
		GRPCKeepAlive: &v1.GRPCKeepAlive{Time: &metav1.Duration{Duration: 5 * time.Minute}, PermitWithoutStream: true}}}
	return plan.Build(plan.Snapshot{
		Pipelines: []v1.GnmicPipeline{{ObjectMeta: meta("p"), Spec: v1.PipelineSpec{ClusterRef: "core", Enabled: true,
			TargetRefs: []string{"r1", "r2"}, SubscriptionRefs: []string{"ifaces"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"out"}}}}},
		Outputs: []v1.Output{{ObjectMeta: meta("out"), Spec: v1.OutputSpec{Type: v1.OutputFile,
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"file-type":"stdout"}`)}}}},
		Targets: []v1.Target{
			{ObjectMeta: meta("r1"), Spec: v1.TargetSpec{Address: addr1, Profile: "default"}},
			{ObjectMeta: meta("r2"), Spec: v1.TargetSpec{Address: addr2, Profile: "default"}},
		},
		Subscriptions: []v1.Subscription{{ObjectMeta: meta("ifaces"), Spec: v1.SubscriptionSpec{
			Paths: []string{"/interfaces/interface/state/counters"}, Mode: "STREAM/SAMPLE",
			SampleInterval: &metav1.Duration{Duration: 10 * time.Second}}}},
		Profiles:    map[ktypes.NamespacedName]*v1.TargetProfile{{Namespace: "lab", Name: "default"}: profile},
		Credentials: map[ktypes.NamespacedName]map[string][]byte{{Namespace: "lab", Name: "creds"}: {"username": []byte("admin"), "password": []byte("admin")}},
	})
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestRealGNMIcAcceptsOperatorConfigAndReachesDevice(t *testing.T) {
	g := NewWithT(t)
	bin := gnmicBinary(t)
	device1, addr1 := fakeDevice(t, "r1")
	_, addr2 := fakeDevice(t, "r2")
	p := operatorPlan(addr1, addr2)
	r1, r2 := p.Config.Targets["lab/r1"], p.Config.Targets["lab/r2"]
	g.Expect(r1).NotTo(BeNil())
	g.Expect(r2).NotTo(BeNil())

	port := freePort(t)
	// The startup file holds the operator's wire encoding (plan.Encode), which gNMIc reads with the same decoder
	// (mapstructure with the duration hook) its collector API uses.
	wire := map[string]map[string]any{}
	body, _, err := plan.Encode(p.ForPod([]string{"lab/r1"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(body, &wire)).To(Succeed())
	cfg := map[string]any{
		"api-server":    map[string]any{"address": fmt.Sprintf("127.0.0.1:%d", port)},
		"log":           true,
		"targets":       wire["targets"],
		"subscriptions": wire["subscriptions"],
		"outputs":       wire["outputs"],
	}
	data, err := yaml.Marshal(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "gnmic.yaml")
	g.Expect(os.WriteFile(cfgFile, data, 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	cmd := exec.CommandContext(ctx, bin, "--config", cfgFile, "subscribe")
	cmd.Stdout, cmd.Stderr = logs, logs
	g.Expect(cmd.Start()).To(Succeed())
	defer func() { cancel(); _ = cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d/api/v1", port)

	// gNMIc dials the device with the operator's target config and sends the operator's subscription.
	g.Eventually(func(g Gomega) {
		reqs := device1.Requests()
		g.Expect(reqs).NotTo(BeEmpty())
		sub := reqs[0].GetSubscribe()
		g.Expect(sub).NotTo(BeNil())
		g.Expect(sub.GetMode().String()).To(Equal("STREAM"))
		g.Expect(sub.GetSubscription()).To(HaveLen(1))
		g.Expect(sub.GetSubscription()[0].GetMode().String()).To(Equal("SAMPLE"))
		g.Expect(sub.GetSubscription()[0].GetSampleInterval()).To(Equal(uint64(10 * time.Second)))
		g.Expect(sub.GetEncoding().String()).To(Equal("JSON_IETF"))
	}).WithTimeout(60*time.Second).Should(Succeed(), "gNMIc log:\n%s", logs)

	// The REST API accepts a second operator-generated target config as is, and returns it unchanged.
	body, err = json.Marshal(r2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		resp, err := http.Post(base+"/config/targets", "application/json", bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).WithTimeout(30*time.Second).Should(Succeed(), "gNMIc log:\n%s", logs)
	resp, err := http.Get(base + "/config/targets")
	g.Expect(err).NotTo(HaveOccurred())
	held, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(err).NotTo(HaveOccurred())
	var targets map[string]map[string]any
	g.Expect(json.Unmarshal(held, &targets)).To(Succeed(), string(held))
	g.Expect(targets).To(HaveKey("lab/r2"))
	got := targets["lab/r2"]
	g.Expect(got["address"]).To(Equal(addr2))
	g.Expect(got["username"]).To(Equal("admin"))
	g.Expect(got["subscriptions"]).To(Equal([]any{"lab/p/ifaces"}))
	g.Expect(got["encoding"]).To(Equal("json_ietf"))
	g.Expect(got["timeout"]).To(BeNumerically("==", float64(5*time.Second)))
	// And the startup target is there under the operator's name, with every field gNMIc read from the wire
	// encoding (its grpc-keepalive type has no json tags, hence the Go names in its answer).
	g.Expect(targets).To(HaveKey("lab/r1"))
	g.Expect(targets["lab/r1"]["grpc-keepalive"]).To(And(HaveKeyWithValue("PermitWithoutStream", true),
		HaveKeyWithValue("Time", BeNumerically("==", float64(5*time.Minute)))))
	g.Expect(targets["lab/r1"]["timeout"]).To(BeNumerically("==", float64(5*time.Second)))
	g.Expect(strings.Contains(logs.String(), "panic")).To(BeFalse(), logs.String())
}
