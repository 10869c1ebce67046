package gnmicserver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

const twoTargets = `{"targets":{"lab/r1":{"name":"lab/r1","address":"r1:57400","subscriptions":["lab/ifaces"],"timeout":10000000000},
  "lab/r2":{"name":"lab/r2","address":"r2:57400","subscriptions":["lab/ifaces"]}},
 "subscriptions":{"lab/ifaces":{"name":"lab/ifaces","paths":["/interfaces"],"mode":"stream","stream-mode":"sample","sample-interval":10000000000}},
 "outputs":{},"inputs":{},"processors":{},"tunnel-target-matches":{}}`

func TestApplyIsAFullReplace(t *testing.T) {
	g := NewWithT(t)
	s := start(t)
	code, body := post(t, s.URL()+"/api/v1/config/apply", twoTargets)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(s.TargetNames()).To(Equal([]string{"lab/r1", "lab/r2"}))

	// Anything absent from the next apply is deleted.
	code, _ = post(t, s.URL()+"/api/v1/config/apply", strings.Replace(twoTargets, `"lab/r2":{"name":"lab/r2","address":"r2:57400","subscriptions":["lab/ifaces"]}`, `"lab/r3":{"name":"lab/r3","address":"r3:1"}`, 1))
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(s.TargetNames()).To(Equal([]string{"lab/r1", "lab/r3"}))

	// An empty request resets everything.
	code, _ = post(t, s.URL()+"/api/v1/config/apply", `{}`)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(s.TargetNames()).To(BeEmpty())
	g.Expect(s.ApplyCount()).To(Equal(3))
}

func TestApplyRejections(t *testing.T) {
	s := start(t)
	for name, tc := range map[string]struct{ body, want string }{
		// gNMIc's errors are mapstructure's, naming the key path.
		"history as a string":    {`{"subscriptions":{"s":{"paths":["/"],"history":{"snapshot":"2026-01-02T03:04:05Z"}}}}`, `'subscriptions[s].history.snapshot' expected a map, got 'string'`},
		"duration not parsable":  {`{"subscriptions":{"s":{"paths":["/"],"sample-interval":"10 seconds"}}}`, `time: unknown unit`},
		"bool as a string":       {`{"targets":{"a":{"address":"a:1","insecure":"yes"}},"subscriptions":{"s":{"paths":["/"]}}}`, `'targets[a].insecure' expected type 'bool', got unconvertible type 'string'`},
		"targets without subs":   {`{"targets":{"a":{"address":"a:1"}}}`, "at least one subscription is required"},
		"inputs without outputs": {`{"inputs":{"i":{"type":"nats"}}}`, "at least one output is required"},
		"not JSON":               {`targets`, "decode error"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := post(t, s.URL()+"/api/v1/config/apply", tc.body)
			NewWithT(t).Expect(code).To(Equal(http.StatusBadRequest))
			NewWithT(t).Expect(body).To(ContainSubstring(tc.want))
		})
	}
	NewWithT(t).Expect(s.ApplyCount()).To(BeZero())
}

func TestApplyDropsUnknownKeysButRecordsThem(t *testing.T) {
	// gNMIc ignores keys it has no field for; encoding/json's Go field names for untagged fields are such keys.
	g := NewWithT(t)
	s := start(t)
	code, body := post(t, s.URL()+"/api/v1/config/apply", `{"targetz":{},
	  "targets":{"a":{"address":"a:1","user":"x","grpc-keepalive":{"Time":1000000000,"PermitWithoutStream":true}}},
	  "subscriptions":{"s":{"paths":["/"],"sampleInterval":1,"sample-interval":"5s"}}}`)
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(s.Unused()).To(ConsistOf("targetz", "targets[a].user", "targets[a].grpc-keepalive.PermitWithoutStream",
		"subscriptions[s].sampleInterval"))
	cfg := s.Config()
	g.Expect(cfg.Targets["a"].GRPCKeepalive.Time).To(Equal(time.Second), "mapstructure matches field names case-insensitively")
	g.Expect(cfg.Targets["a"].GRPCKeepalive.PermitWithoutStream).To(BeFalse(), "the untagged Go name does not match permit-without-stream")
	g.Expect(*cfg.Subscriptions["s"].SampleInterval).To(Equal(5 * time.Second))
}

func TestTunnelTargetMatchesNeedCollector047(t *testing.T) {
	body := `{"subscriptions":{"s":{"paths":["/"]}},"tunnel-target-matches":{"m":{"type":"GNMI_GNOI","id":"^leaf","config":{"timeout":"3s"}}}}`
	for version, want := range map[string]bool{"0.45.0": false, "v0.46.1": false, "0.47.0": true, "": true, "1.0.0": true} {
		d, err := DecodeApply(strings.NewReader(body), version)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if want {
			NewWithT(t).Expect(d.Request.TunnelTargetMatches).To(HaveKey("m"), version)
			NewWithT(t).Expect(d.Request.TunnelTargetMatches["m"].Config.Timeout).To(Equal(3*time.Second), version)
			NewWithT(t).Expect(d.Unused).To(BeEmpty(), version)
		} else {
			NewWithT(t).Expect(d.Request.TunnelTargetMatches).To(BeEmpty(), version)
			NewWithT(t).Expect(d.Unused).To(ConsistOf("tunnel-target-matches"), version)
		}
	}
}

func TestOperatorPayloadDecodes(t *testing.T) {
	// The operator's encoding of an empty plan and a two-target plan decode without a dropped key.
	g := NewWithT(t)
	s := start(t)
	c := &collector.Client{}
	data, _, err := plan.Encode(plan.Empty())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Apply(context.Background(), s.URL(), data)).To(Succeed())
	g.Expect(c.Apply(context.Background(), s.URL(), []byte(twoTargets))).To(Succeed())
	g.Expect(s.Unused()).To(BeEmpty())
	states, err := c.Targets(context.Background(), s.URL())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(states).To(HaveLen(2))
	g.Expect(states["lab/r1"].State).To(Equal("running"))
	g.Expect(states["lab/r1"].ConnectionState).To(Equal("READY"))
	g.Expect(states["lab/r1"].Subscriptions).To(Equal(map[string]string{"lab/ifaces": "running"}))
}

func TestReadOnlyEndpointsAndFaults(t *testing.T) {
	g := NewWithT(t)
	s := start(t)
	post(t, s.URL()+"/api/v1/config/apply", twoTargets)
	for path, want := range map[string]string{
		"/api/v1/healthz":                 `{"status":"healthy"}`,
		"/api/v1/config/targets/lab%2Fr1": `"address":"r1:57400"`,
		"/api/v1/config/subscriptions":    `"stream-mode":"sample"`,
		"/api/v1/targets":                 `"connection-state":"READY"`,
	} {
		resp, err := http.Get(s.URL() + path)
		g.Expect(err).NotTo(HaveOccurred())
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), path)
		g.Expect(string(data)).To(ContainSubstring(want), path)
	}
	c := &collector.Client{HTTP: &http.Client{Timeout: 200 * time.Millisecond}}
	s.SetFault(Fault{Status: http.StatusInternalServerError})
	g.Expect(c.Apply(context.Background(), s.URL(), []byte(`{}`))).To(MatchError(ContainSubstring("HTTP 500")))
	s.SetFault(Fault{Down: true})
	g.Expect(c.Apply(context.Background(), s.URL(), []byte(`{}`))).To(HaveOccurred())
	s.SetFault(Fault{Delay: time.Second})
	g.Expect(c.Apply(context.Background(), s.URL(), []byte(`{}`))).To(MatchError(ContainSubstring("Timeout")))
	s.SetFault(Fault{})
	g.Expect(c.Apply(context.Background(), s.URL(), []byte(`{}`))).To(Succeed())
}

func TestMonitorFollowsStreamAndReportsDrops(t *testing.T) {
	g := NewWithT(t)
	s := start(t)
	var mu sync.Mutex
	drops, changes := 0, 0
	key := types.NamespacedName{Namespace: "lab", Name: "core"}
	m := &collector.Monitor{Client: &collector.Client{}, BackoffMin: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		PollInterval: time.Hour,
		Changed:      func(types.NamespacedName) { mu.Lock(); changes++; mu.Unlock() },
		Dropped:      func(_ types.NamespacedName, pod int) { mu.Lock(); drops++; mu.Unlock() }}
	m.Ensure(key, map[int]string{0: s.URL()})
	defer m.Stop(key)
	g.Eventually(s.Streams).Should(Equal(1))
	post(t, s.URL()+"/api/v1/config/apply", twoTargets)
	g.Eventually(func() map[string]collector.TargetState { return m.States(key)[0] }).Should(HaveLen(2))

	s.SetTargetState("lab/r2", "failed", "TRANSIENT_FAILURE", "connection refused")
	g.Eventually(func() string { return m.States(key)[0]["lab/r2"].FailedReason }).Should(Equal("connection refused"))

	s.DropStreams()
	g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return drops }).Should(Equal(1))
	g.Eventually(s.Streams).Should(Equal(1), "the monitor reconnects")
	g.Eventually(func() map[string]collector.TargetState { return m.States(key)[0] }).Should(HaveLen(2))
	mu.Lock()
	g.Expect(changes).To(BeNumerically(">=", 3))
	mu.Unlock()
}

func TestReadEvents(t *testing.T) {
	g := NewWithT(t)
	var got []collector.Event
	stream := ": keepalive\n\nevent: create\ndata: {\"store\":\"state\",\"kind\":\"targets\",\"name\":\"a\",\"event-type\":\"create\",\"object\":{\"state\":\"running\"}}\n\n" +
		"event: bad\ndata: not json\n\nevent: delete\ndata: {\"store\":\"state\",\"kind\":\"targets\",\"name\":\"a\",\"event-type\":\"delete\"}\n\n"
	err := collector.ReadEvents(bytes.NewBufferString(stream), func(e collector.Event) { got = append(got, e) })
	g.Expect(err).To(MatchError(io.ErrUnexpectedEOF))
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0].Name).To(Equal("a"))
	g.Expect(got[1].EventType).To(Equal("delete"))
}

// FuzzApply: any body gets 200 or 400, never a panic, and a rejected body leaves the configuration alone.
func FuzzApply(f *testing.F) {
	f.Add([]byte(twoTargets))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"targets":{"a":{"address":"a:1"}}}`))
	f.Add([]byte(`{"inputs":{"i":{}}, "outputs":{"o":{"type":"file"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := &Server{states: map[string]*TargetState{}, subscribers: map[*subscriber]bool{}, config: emptyConfig()}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/config/apply", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest:
			if s.ApplyCount() != 0 || len(s.TargetNames()) != 0 {
				t.Fatal("a rejected apply changed the configuration")
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}
