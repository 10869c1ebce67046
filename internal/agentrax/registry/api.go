package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxBodyBytes bounds the POST /agents body.
const MaxBodyBytes = 64 << 10

// HandlerOptions configure HandlerWith.
type HandlerOptions struct {
	// PlaintextWrites accepts writes (and their bearer tokens) over plain HTTP: development only
	// (--registry-plaintext-writes).
	PlaintextWrites bool
}

// Handler returns the registry's HTTP API. Writes go through auth; a nil auth rejects every write (there is
// no unauthenticated mode). Writes are accepted only over TLS: their bearer tokens (the administrator's static
// token among them) must not cross the network in clear.
func Handler(r *Registry, auth Authenticator) http.Handler {
	return HandlerWith(r, auth, HandlerOptions{})
}

// HandlerWith is Handler with options.
func HandlerWith(r *Registry, auth Authenticator, opts HandlerOptions) http.Handler {
	a := &api{r: r, auth: auth, failures: newFailureLimiter(r.opts.Clock), plaintextWrites: opts.PlaintextWrites}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents", a.listAgents)
	mux.HandleFunc("GET /agents/{ns}/{name}", a.getAgent)
	mux.HandleFunc("POST /agents", a.write(a.postAgent))
	mux.HandleFunc("DELETE /agents/{ns}/{name}", a.write(a.deleteAgent))
	mux.HandleFunc("GET /v0.1/servers", a.listServers)
	mux.HandleFunc("GET /v0.1/servers/{name}/versions", a.serverVersions)
	mux.HandleFunc("GET /v0.1/servers/{name}/versions/{version}", a.serverVersion)
	return jsonFallback(mux)
}

// jsonFallback turns the mux's own plain-text 404 and 405 answers into JSON errors (keeping Allow), so that
// every error of the API has the same shape. A catch-all pattern cannot do this: it would swallow the 405s.
func jsonFallback(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h, pattern := mux.Handler(req)
		if pattern != "" {
			mux.ServeHTTP(w, req)
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, req)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		writeError(w, rec.status, strings.ToLower(http.StatusText(rec.status)))
	})
}

// statusRecorder keeps the status and headers of a response and discards its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(status int)      { r.status = status }

type api struct {
	r        *Registry
	auth     Authenticator
	failures *failureLimiter
	// plaintextWrites accepts writes without TLS (development only).
	plaintextWrites bool
}

// bufPool recycles the list response buffers (the benchmark's hot path).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (a *api) listAgents(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.r.snapshot().agentsJSON)
}

func (a *api) getAgent(w http.ResponseWriter, req *http.Request) {
	k := Key{Namespace: req.PathValue("ns"), Name: req.PathValue("name")}
	e, ok := a.r.Get(k)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("agent %s not registered", k))
		return
	}
	b, _ := json.Marshal(e)
	writeJSON(w, http.StatusOK, b)
}

// write wraps a mutating handler: bearer token, authenticator, leader check. The handler checks the
// identity's namespace against the entry it writes.
func (a *api) write(next func(http.ResponseWriter, *http.Request, Identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if req.TLS == nil && !a.plaintextWrites {
			// Refused before the token is read: nothing is authenticated on a channel anyone on the path can read.
			writeError(w, http.StatusForbidden, "registry writes require TLS: use https (the registry serves it with "+
				"--registry-tls-cert-dir); the bearer token sent over plain HTTP should be considered exposed")
			return
		}
		token, ok := bearerToken(req)
		if !ok || a.auth == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentrax-registry"`)
			writeError(w, http.StatusUnauthorized, "a bearer token is required")
			return
		}
		addr := clientAddr(req)
		if wait := a.failures.wait(addr); wait > 0 {
			w.Header().Set("Retry-After", retryAfter(wait))
			writeError(w, http.StatusTooManyRequests, "too many failed authentications from this address; retry later")
			return
		}
		id, err := a.auth.Authenticate(req.Context(), token)
		if err != nil {
			if errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrForbidden) {
				a.failures.failed(addr)
			}
			switch {
			case errors.Is(err, ErrForbidden):
				writeError(w, http.StatusForbidden, "this identity may not write to the registry")
			case errors.Is(err, ErrUnauthenticated):
				w.Header().Set("WWW-Authenticate", `Bearer realm="agentrax-registry", error="invalid_token"`)
				writeError(w, http.StatusUnauthorized, "invalid token")
			default:
				a.r.opts.Log.Error(err, "registry authentication")
				writeError(w, http.StatusServiceUnavailable, "authentication is unavailable")
			}
			return
		}
		if !a.r.IsLeader() {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "this replica is not the leader; retry")
			return
		}
		next(w, req, id)
	}
}

// mayWrite answers 403 when id may not write entries of namespace ns.
func mayWrite(w http.ResponseWriter, id Identity, ns string) bool {
	if id.MayWrite(ns) {
		return true
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("%s may only write agents of namespace %q, not %q", id.User,
		id.Namespace, ns))
	return false
}

// DecodeEntry reads a POST /agents body: one JSON object, known fields only, nothing after it, valid.
// Server-managed timestamps are ignored.
func DecodeEntry(body io.Reader) (Entry, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var e Entry
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Entry{}, errors.New("invalid JSON: trailing data after the object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Entry{}, errors.New("invalid JSON: trailing data after the object")
	}
	e.RegisteredAt, e.HeartbeatAt = time.Time{}, time.Time{}
	if e.ManagedBy != "" {
		return Entry{}, errors.New("managedBy: set by the operator only")
	}
	if err := e.Validate(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (a *api) postAgent(w http.ResponseWriter, req *http.Request, id Identity) {
	e, err := DecodeEntry(http.MaxBytesReader(w, req.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !mayWrite(w, id, e.Namespace) {
		return
	}
	created, err := a.r.RegisterUnmanaged(req.Context(), e)
	var managed *ManagedError
	if errors.As(err, &managed) {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	if errors.Is(err, ErrFull) {
		writeError(w, http.StatusInsufficientStorage, err.Error())
		return
	}
	if err != nil && !errors.Is(err, ErrNotLeader) {
		// The entry is in memory and served; persisting is retried by the sweeper.
		a.r.opts.Log.Error(err, "persisting the registry", "agent", e.Key().String())
	}
	if errors.Is(err, ErrNotLeader) {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	stored, _ := a.r.Get(e.Key())
	b, _ := json.Marshal(stored)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/agents/"+url.PathEscape(e.Namespace)+"/"+url.PathEscape(e.Name))
	}
	writeJSON(w, status, b)
}

func (a *api) deleteAgent(w http.ResponseWriter, req *http.Request, id Identity) {
	k := Key{Namespace: req.PathValue("ns"), Name: req.PathValue("name")}
	if !mayWrite(w, id, k.Namespace) {
		return
	}
	ok, err := a.r.DeregisterUnmanaged(req.Context(), k)
	var managed *ManagedError
	switch {
	case errors.As(err, &managed):
		writeError(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, ErrNotLeader):
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		a.r.opts.Log.Error(err, "persisting the registry", "agent", k.String())
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("agent %s not registered", k))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ParseServerQuery validates the query of GET /v0.1/servers.
func ParseServerQuery(v url.Values) (ServerQuery, error) {
	q := ServerQuery{Limit: DefaultLimit, Cursor: v.Get("cursor"), Search: v.Get("search")}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return q, fmt.Errorf("limit must be between 1 and %d", MaxLimit)
		}
		q.Limit = n
	}
	if s := v.Get("updated_since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, errors.New("updated_since must be an RFC 3339 time")
		}
		q.UpdatedSince = t
	}
	// Every server has exactly one version here, the latest; any other filter value matches nothing.
	if s := v.Get("version"); s != "" && s != "latest" {
		return q, errors.New(`version: only "latest" is supported`)
	}
	return q, nil
}

func (a *api) listServers(w http.ResponseWriter, req *http.Request) {
	q, err := ParseServerQuery(req.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	after := ""
	if q.Cursor != "" {
		if after, err = decodeCursor(q.Cursor); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	bp := bufPool.Get().(*[]byte)
	b := a.r.snapshot().listServers((*bp)[:0], q, after)
	writeJSON(w, http.StatusOK, b)
	if cap(b) <= 4<<20 { // keep the grown array for the next request, unless a huge page made it huge
		*bp = b[:0]
		bufPool.Put(bp)
	}
}

// serverVersions answers GET /v0.1/servers/{name}/versions: the one version the registry holds.
func (a *api) serverVersions(w http.ResponseWriter, req *http.Request) {
	item, ok := a.r.snapshot().server(req.PathValue("name"))
	if !ok {
		writeError(w, http.StatusNotFound, "server not found")
		return
	}
	b := make([]byte, 0, len(item)+48)
	b = append(b, `{"servers":[`...)
	b = append(b, item...)
	b = append(b, `],"metadata":{"count":1}}`...)
	writeJSON(w, http.StatusOK, b)
}

// serverVersion answers GET /v0.1/servers/{name}/versions/{version|latest}.
func (a *api) serverVersion(w http.ResponseWriter, req *http.Request) {
	name, version := req.PathValue("name"), req.PathValue("version")
	snap := a.r.snapshot()
	item, ok := snap.server(name)
	if ok && version != "latest" {
		var sr struct {
			Server struct {
				Version string `json:"version"`
			} `json:"server"`
		}
		ok = json.Unmarshal(item, &sr) == nil && sr.Server.Version == version
	}
	if !ok {
		writeError(w, http.StatusNotFound, "server version not found")
		return
	}
	writeJSON(w, http.StatusOK, item)
}

// ServerPath is the URL path of a server's versions endpoint (the name's slash escaped, as MCP clients do).
func ServerPath(name string) string {
	return "/v0.1/servers/" + url.PathEscape(name) + "/versions"
}
