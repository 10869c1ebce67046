package targetsource

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

func fetch(t *testing.T, client *http.Client, req HTTPRequest) (HTTPResult, error) {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	return FetchHTTP(context.Background(), client, req)
}

func TestFetchHTTPAuthModes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, basic := r.BasicAuth()
		ok := (basic && user == "u" && pass == "p") ||
			r.Header.Get("Authorization") == "Bearer tok" ||
			r.Header.Get("Authorization") == "Token tok2" ||
			r.Header.Get("X-Api-Key") == "k"
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "application/json") || r.Header.Get("X-Extra") != "1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = fmt.Fprint(w, `[{"name":"a","address":"h"}]`)
	}))
	defer srv.Close()
	for name, creds := range map[string]HTTPCredentials{
		"basic":  {Basic: true, BasicUser: "u", BasicPassword: "p"},
		"bearer": {Token: "tok"},
		"scheme": {Token: "tok2", TokenScheme: "Token"},
		"header": {HeaderName: "X-Api-Key", HeaderValue: "k"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := fetch(t, nil, HTTPRequest{URL: srv.URL, Creds: creds, Headers: map[string]string{"X-Extra": "1"}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Pages).To(HaveLen(1))
		})
	}
	_, err := fetch(t, nil, HTTPRequest{URL: srv.URL, Creds: HTTPCredentials{Token: "wrong"}})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("HTTP 401")))
}

func TestFetchHTTPPost(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := new(strings.Builder)
		_, _ = fmt.Fprint(buf, r.Method)
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = fmt.Fprint(w, "- name: a\n  address: h\n")
	}))
	defer srv.Close()
	res, err := fetch(t, nil, HTTPRequest{URL: srv.URL, Method: http.MethodPost, Body: `{"q":1}`})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Pages[0]).To(Equal([]any{map[string]any{"name": "a", "address": "h"}}))
}

func TestFetchHTTPTLS(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, _ = fmt.Fprint(w, `[]`)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MaxVersion: tls.VersionTLS13}
	srv.StartTLS()
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	// The httptest certificate doubles as a client certificate; its key is only in the server's config.
	cert := srv.TLS.Certificates[0]
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyPEM := mustKeyPEM(t, cert)

	cfg, err := TLSConfig(false, caPEM, certPEM, keyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.MinVersion).To(Equal(uint16(tls.VersionTLS12)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	_, err = fetch(t, client, HTTPRequest{URL: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())

	noCA, err := TLSConfig(false, nil, certPEM, keyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fetch(t, &http.Client{Transport: &http.Transport{TLSClientConfig: noCA}}, HTTPRequest{URL: srv.URL})
	g.Expect(err).To(MatchError(ContainSubstring("certificate")))

	noClient, err := TLSConfig(false, caPEM, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fetch(t, &http.Client{Transport: &http.Transport{TLSClientConfig: noClient}}, HTTPRequest{URL: srv.URL})
	g.Expect(err).To(HaveOccurred())

	old := &tls.Config{MaxVersion: tls.VersionTLS11, InsecureSkipVerify: true} //nolint:gosec // the point of the test
	oldSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	oldSrv.TLS = old
	oldSrv.StartTLS()
	defer oldSrv.Close()
	insecure, _ := TLSConfig(true, nil, nil, nil)
	_, err = fetch(t, &http.Client{Transport: &http.Transport{TLSClientConfig: insecure}}, HTTPRequest{URL: oldSrv.URL})
	g.Expect(err).To(HaveOccurred(), "TLS below 1.2 is refused")

	_, err = TLSConfig(false, []byte("junk"), nil, nil)
	g.Expect(err).To(HaveOccurred())
}

func TestFetchHTTPPagination(t *testing.T) {
	var hits atomic.Int32
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = fmt.Fprint(w, `[]`)
	}))
	defer other.Close()
	mux.HandleFunc("/link", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("page") {
		case "":
			w.Header().Set("Link", `</link?page=2>; rel="next", </link>; rel="first"`)
			_, _ = fmt.Fprint(w, `{"results":[1],"next":"/ignored"}`)
		default:
			_, _ = fmt.Fprint(w, `{"results":[2]}`)
		}
	})
	mux.HandleFunc("/field", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			_, _ = fmt.Fprint(w, `{"meta":{"next":"abc"}}`)
		case "abc":
			_, _ = fmt.Fprint(w, `{"meta":{"next":"def"}}`)
		default:
			_, _ = fmt.Fprint(w, `{"meta":{}}`)
		}
	})
	mux.HandleFunc("/url", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("p") == "" {
			_, _ = fmt.Fprintf(w, `{"next":"%s/url?p=2"}`, srv.URL)
			return
		}
		_, _ = fmt.Fprint(w, `{"next":null}`)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", `</loop>; rel="next"`)
		_, _ = fmt.Fprint(w, `[]`)
	})
	mux.HandleFunc("/leak", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", fmt.Sprintf(`<%s/steal>; rel="next"`, other.URL))
		_, _ = fmt.Fprint(w, `[]`)
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("p") == "" {
			w.Header().Set("Link", `</fail?p=2>; rel="next"`)
			_, _ = fmt.Fprint(w, `[]`)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})

	g := NewWithT(t)
	res, err := fetch(t, nil, HTTPRequest{URL: srv.URL + "/link", NextField: "next", MaxPages: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Pages).To(HaveLen(2), "Link wins over nextField")
	g.Expect(res.Truncated).To(BeFalse())

	res, err = fetch(t, nil, HTTPRequest{URL: srv.URL + "/field", NextField: "meta.next", RequestParam: "cursor", MaxPages: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Pages).To(HaveLen(3))

	res, err = fetch(t, nil, HTTPRequest{URL: srv.URL + "/url", NextField: "next", MaxPages: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Pages).To(HaveLen(2))

	res, err = fetch(t, nil, HTTPRequest{URL: srv.URL + "/loop", MaxPages: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Truncated).To(BeTrue())
	g.Expect(res.TruncatedReason).To(ContainSubstring("already read"))

	res, err = fetch(t, nil, HTTPRequest{URL: srv.URL + "/field", NextField: "meta.next", RequestParam: "cursor", MaxPages: 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Truncated).To(BeTrue())
	g.Expect(res.TruncatedReason).To(ContainSubstring("maxPages"))

	_, err = fetch(t, nil, HTTPRequest{URL: srv.URL + "/leak", MaxPages: 10, Creds: HTTPCredentials{Token: "secret"}})
	g.Expect(err).To(MatchError(ErrCrossOrigin))
	g.Expect(hits.Load()).To(BeZero(), "credentials never reach another origin")

	_, err = fetch(t, nil, HTTPRequest{URL: srv.URL + "/fail", MaxPages: 10})
	g.Expect(err).To(MatchError(ContainSubstring("HTTP 502")))
}

func TestFetchHTTPPageCap(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`["`))
		chunk := []byte(strings.Repeat("x", 1<<20))
		for i := 0; i < 65; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`"]`))
	}))
	defer srv.Close()
	_, err := fetch(t, nil, HTTPRequest{URL: srv.URL})
	g.Expect(err).To(MatchError(ContainSubstring("larger than")))
	_, err = fetch(t, nil, HTTPRequest{URL: "ftp://x/y"})
	g.Expect(err).To(HaveOccurred())
}

func TestNextLink(t *testing.T) {
	g := NewWithT(t)
	g.Expect(nextLink([]string{`<https://a/b?page=2>; rel="next"`})).To(Equal("https://a/b?page=2"))
	g.Expect(nextLink([]string{`<a>; rel="prev", <b>; rel="next last"`})).To(Equal("b"))
	g.Expect(nextLink([]string{`<a>; rel=prev`})).To(Equal(""))
	g.Expect(nextLink([]string{`garbage`})).To(Equal(""))
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://inv.example.com/devices":                       "https://inv.example.com/devices",
		"https://inv.example.com/devices?api_key=s3cret&page=2": "https://inv.example.com/devices?api_key=redacted&page=redacted",
		"https://user:pw@inv.example.com/d#frag":                "https://inv.example.com/d",
		"http://inv.example.com/?token=a&token=b":               "http://inv.example.com/?token=redacted",
		"%zz": "<unparsable URL>",
	} {
		NewWithT(t).Expect(RedactRawURL(raw)).To(Equal(want), raw)
	}
}

func TestFetchHTTPErrorsCarryNoQueryToken(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	_, err := FetchHTTP(context.Background(), srv.Client(), HTTPRequest{URL: srv.URL + "/d?api_key=s3cret"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("api_key=redacted"))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))

	// A transport error: Go's client puts the whole URL in it.
	srv.Close()
	_, err = FetchHTTP(context.Background(), srv.Client(), HTTPRequest{URL: srv.URL + "/d?api_key=s3cret"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
}

func TestFetchHTTPBoundsAllPagesTogether(t *testing.T) {
	g := NewWithT(t)
	// Three pages of 25 MiB each: every page is under MaxPageBytes, together they are over MaxTotalBytes.
	page := []byte(`{"results":[],"pad":"` + strings.Repeat("x", 25<<20) + `"}`)
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", fmt.Sprintf(`</p%d>; rel="next"`, served.Add(1)))
		_, _ = w.Write(page)
	}))
	t.Cleanup(srv.Close)
	_, err := FetchHTTP(context.Background(), srv.Client(), HTTPRequest{URL: srv.URL + "/p0", MaxPages: 100})
	g.Expect(err).To(MatchError(ContainSubstring("pages together are larger than")))
	g.Expect(served.Load()).To(Equal(int32(3)))
}
