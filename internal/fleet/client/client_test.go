package client

import (
	"time"

	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"
	. "github.com/onsi/gomega"
)

func TestNormalizeBaseURL(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want, wantErr string
	}{
		"plain":              {"https://fleet.example.net", "https://fleet.example.net", ""},
		"trailing slash":     {"https://fleet.example.net/", "https://fleet.example.net", ""},
		"pipeline suffix":    {"https://fleet.example.net/pipeline.v1.PipelineService", "https://fleet.example.net", ""},
		"collector suffix":   {"https://fleet.example.net/api/collector.v1.CollectorService/", "https://fleet.example.net/api", ""},
		"path kept":          {"https://fleet.example.net/fleet-management", "https://fleet.example.net/fleet-management", ""},
		"port kept":          {"https://127.0.0.1:8443", "https://127.0.0.1:8443", ""},
		"http refused":       {"http://fleet.example.net", "", "must be https"},
		"no scheme":          {"fleet.example.net", "", "must be https"},
		"no host":            {"https:///x", "", "no host"},
		"userinfo refused":   {"https://u:p@fleet.example.net", "", "credentials"},
		"query refused":      {"https://fleet.example.net?x=1", "", "query"},
		"whitespace trimmed": {"  https://fleet.example.net  ", "https://fleet.example.net", ""},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := NormalizeBaseURL(tc.in)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestHTTPStatusAndIsTransient(t *testing.T) {
	for code, tc := range map[connect.Code]struct {
		status    int
		transient bool
	}{
		connect.CodeInvalidArgument:    {400, false},
		connect.CodeOutOfRange:         {400, false},
		connect.CodeNotFound:           {404, false},
		connect.CodeAlreadyExists:      {409, false},
		connect.CodeAborted:            {409, false},
		connect.CodeFailedPrecondition: {412, false},
		connect.CodePermissionDenied:   {403, false},
		connect.CodeUnauthenticated:    {401, false},
		connect.CodeResourceExhausted:  {429, true},
		connect.CodeCanceled:           {408, true},
		connect.CodeDeadlineExceeded:   {408, true},
		connect.CodeUnimplemented:      {501, true},
		connect.CodeUnavailable:        {503, true},
		connect.CodeInternal:           {500, true},
		connect.CodeUnknown:            {500, true},
		connect.CodeDataLoss:           {500, true},
	} {
		t.Run(code.String(), func(t *testing.T) {
			g := NewWithT(t)
			err := connect.NewError(code, errors.New("x"))
			g.Expect(HTTPStatus(err)).To(Equal(tc.status))
			g.Expect(HTTPStatus(errors.Join(errors.New("wrapped"), err))).To(Equal(tc.status), "wrapped errors map too")
			g.Expect(IsTransient(err)).To(Equal(tc.transient))
		})
	}
	g := NewWithT(t)
	g.Expect(HTTPStatus(nil)).To(Equal(200))
	g.Expect(IsTransient(nil)).To(BeFalse())
	g.Expect(HTTPStatus(errors.New("dial tcp: refused"))).To(Equal(500))
	g.Expect(IsTransient(errors.New("dial tcp: refused"))).To(BeTrue())
	g.Expect(IsNotFound(connect.NewError(connect.CodeNotFound, nil))).To(BeTrue())
	g.Expect(IsRateLimited(connect.NewError(connect.CodeResourceExhausted, nil))).To(BeTrue())
	g.Expect(IsInvalid(connect.NewError(connect.CodeInvalidArgument, nil))).To(BeTrue())
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"http":        {Config{BaseURL: "http://x", Username: "u", Password: "p"}, "must be https"},
		"no username": {Config{BaseURL: "https://x", Password: "p"}, "username and password"},
		"no password": {Config{BaseURL: "https://x", Username: "u"}, "username and password"},
		"bad CA":      {Config{BaseURL: "https://x", Username: "u", Password: "p", CAPEM: []byte("nope")}, "no PEM"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestCancelledContextNeverReachesTheServer(t *testing.T) {
	g := NewWithT(t)
	c, err := New(Config{BaseURL: "https://127.0.0.1:1", Username: "u", Password: "p"})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.GetPipeline(ctx, "1")
	g.Expect(err).To(MatchError(ContainSubstring("rate limiter")))
}

func TestParseRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"": 0, "0": 0, "-3": 0, "2": 2 * time.Second, " 7 ": 7 * time.Second, "abc": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, "999999999": 10 * time.Minute,
		"9227000000": 10 * time.Minute, // overflowed time.Duration before the comparison moved to seconds
	} {
		NewWithT(t).Expect(ParseRetryAfter(in)).To(Equal(want), "%q", in)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "1", "-1", "600", "99999999999999999999", "1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d := ParseRetryAfter(s); d < 0 || d > 10*time.Minute {
			t.Fatalf("%q -> %s", s, d)
		}
	})
}
