package registry

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func validEntry() Entry {
	return Entry{Namespace: "team-a", Name: "planner", Endpoint: "http://planner.team-a.svc:8080/mcp",
		Tools: []string{"search", "plan"}, TTL: 90}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Entry)
		wantErr string
	}{
		{"valid", func(*Entry) {}, ""},
		{"default ttl", func(e *Entry) { e.TTL = 0 }, ""},
		{"bad namespace", func(e *Entry) { e.Namespace = "Team_A" }, "namespace"},
		{"empty name", func(e *Entry) { e.Name = "" }, "name"},
		{"relative endpoint", func(e *Entry) { e.Endpoint = "/mcp" }, "endpoint"},
		{"ftp endpoint", func(e *Entry) { e.Endpoint = "ftp://x/mcp" }, "endpoint"},
		{"ttl below minimum", func(e *Entry) { e.TTL = 29 }, "ttl"},
		{"ttl above maximum", func(e *Entry) { e.TTL = 86401 }, "ttl"},
		{"negative ttl", func(e *Entry) { e.TTL = -1 }, "ttl"},
		{"duplicate tool", func(e *Entry) { e.Tools = []string{"a", "a"} }, "duplicate"},
		{"empty tool", func(e *Entry) { e.Tools = []string{""} }, "tools"},
		{"long tool", func(e *Entry) { e.Tools = []string{strings.Repeat("x", MaxToolNameLen+1)} }, "tools"},
		{"too many tools", func(e *Entry) {
			e.Tools = nil
			for i := range MaxTools + 1 {
				e.Tools = append(e.Tools, strings.Repeat("t", 1+i%100)+string(rune('a'+i/100)))
			}
		}, "at most"},
		{"long version", func(e *Entry) { e.Version = strings.Repeat("1", MaxVersionLen+1) }, "version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := validEntry()
			tc.mutate(&e)
			err := e.Validate()
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a, b := validEntry(), validEntry()
	b.Name = "coder"
	a.RegisteredAt, a.HeartbeatAt, b.RegisteredAt, b.HeartbeatAt = at, at, at, at
	b.normalize()
	a.normalize()
	one, err := EncodeState([]Entry{a, b})
	g.Expect(err).NotTo(HaveOccurred())
	two, err := EncodeState([]Entry{b, a})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one).To(Equal(two), "encoding does not depend on order, so an unchanged registry is not rewritten")
	back, err := DecodeState(one)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal([]Entry{b, a}))
}

func TestDecodeState(t *testing.T) {
	cases := []struct {
		name      string
		data      string
		wantNames []string
		wantErr   string
	}{
		{"empty ConfigMap key", "", nil, ""},
		{"not JSON", "{", nil, "registry state"},
		{"unknown version", `{"version":2,"agents":[]}`, nil, "unknown version"},
		{"invalid entry dropped, others kept", `{"version":1,"agents":[
			{"namespace":"a","name":"x","endpoint":"http://x.a.svc:8080/mcp","tools":[],"ttl":90},
			{"namespace":"a","name":"y","endpoint":"nope","tools":[],"ttl":90}]}`, []string{"x"}, "a/y"},
		{"duplicate dropped", `{"version":1,"agents":[
			{"namespace":"a","name":"x","endpoint":"http://x.a.svc:8080/mcp","tools":["b","a"],"ttl":90},
			{"namespace":"a","name":"x","endpoint":"http://x.a.svc:8080/mcp","tools":[],"ttl":90}]}`,
			[]string{"x"}, "duplicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := DecodeState([]byte(tc.data))
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			}
			var names []string
			for _, e := range got {
				names = append(names, e.Name)
				g.Expect(e.Tools).NotTo(BeNil())
			}
			g.Expect(names).To(Equal(tc.wantNames))
		})
	}
}

func TestDecodeEntry(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"valid", `{"namespace":"a","name":"x","endpoint":"http://x.a.svc:8080/mcp","tools":["t"],"ttl":60}`, ""},
		{"timestamps ignored", `{"namespace":"a","name":"x","endpoint":"http://x:1/mcp","registeredAt":"2020-01-01T00:00:00Z"}`, ""},
		{"unknown field", `{"namespace":"a","name":"x","endpoint":"http://x:1/mcp","tll":60}`, "unknown field"},
		{"ttl as duration string", `{"namespace":"a","name":"x","endpoint":"http://x:1/mcp","ttl":"90s"}`, "invalid JSON"},
		{"two objects", `{"namespace":"a","name":"x","endpoint":"http://x:1/mcp"}{}`, "trailing"},
		{"array", `[]`, "invalid JSON"},
		{"invalid entry", `{"namespace":"a","name":"x","endpoint":"http://x:1/mcp","ttl":5}`, "ttl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e, err := DecodeEntry(strings.NewReader(tc.body))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(e.RegisteredAt.IsZero()).To(BeTrue())
		})
	}
}

// FuzzDecodeEntry: whatever the body, the decoder either errors or returns an entry that validates and
// survives the persisted-state round trip.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(`{"namespace":"a","name":"x","endpoint":"http://x.a.svc:8080/mcp","tools":["t","u"],"ttl":60}`)
	f.Add(`{"namespace":"a","name":"x.y","endpoint":"https://h/p","version":"1.0.0"}`)
	f.Add(`{"namespace":"","tools":[""]}`)
	f.Add(`{}{}`)
	f.Add(`{"namespace":"a","name":"x","endpoint":"http://x/","protocolVersion":"2025-03-26","toolInfo":[{"name":"t","title":"T","inputSchema":{ "type": "object" }}]}`)
	f.Add(`{"namespace":"a","name":"x","endpoint":"http://x/","toolInfo":[{"name":"t","inputSchema":null}],"managedBy":"x"}`)
	f.Fuzz(func(t *testing.T, body string) {
		e, err := DecodeEntry(strings.NewReader(body))
		if err != nil {
			return
		}
		if verr := e.Validate(); verr != nil {
			t.Fatalf("decoded entry does not validate: %v", verr)
		}
		e.normalize()
		data, err := EncodeState([]Entry{e})
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeState(data)
		if err != nil || len(back) != 1 || !back[0].sameContent(&e) {
			t.Fatalf("round trip changed the entry: %v %+v", err, back)
		}
	})
}

func TestHealthInterval(t *testing.T) {
	cases := []struct {
		name                         string
		ttl, configured, probe, want time.Duration
	}{
		{"upstream default 60s against 90s TTL is forced down", 90 * time.Second, 60 * time.Second, 5 * time.Second,
			22500 * time.Millisecond},
		{"fits: 3×20s+5s < 90s", 90 * time.Second, 20 * time.Second, 5 * time.Second, 20 * time.Second},
		{"exactly at the TTL is not enough", 90 * time.Second, 25 * time.Second, 15 * time.Second,
			22500 * time.Millisecond},
		{"unset", 120 * time.Second, 0, time.Second, 30 * time.Second},
		{"unset TTL uses the default", 0, 0, 0, 22500 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := HealthInterval(tc.ttl, tc.configured, tc.probe)
			g.Expect(got).To(Equal(tc.want))
			ttl := tc.ttl
			if ttl == 0 {
				ttl = DefaultTTL
			}
			g.Expect(MaxStrikes*got).To(BeNumerically("<", ttl), "strikes come before expiry")
		})
	}
}
