package gnmic

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// MaxRefreshBody is the largest refresh request body read (1 MiB); larger ones get 413.
const MaxRefreshBody = 1 << 20

// RefreshServer serves POST /api/v1/namespaces/{ns}/targetsources/{name}/refresh on every replica: it checks
// the TargetSource's webhook auth and sets the operator.gnmic.dev/requested-at annotation, which starts a run on
// whichever replica leads.
type RefreshServer struct {
	// Addr is the listen address.
	Addr string
	// Client reads TargetSources (cached) and patches their annotations.
	Client client.Client
	// Secrets reads the auth Secrets straight from the API server.
	Secrets client.Reader
	Clock   clock.PassiveClock
	// Namespaces are the namespaces the manager watches (--watch-namespaces); empty means all. A TargetSource
	// elsewhere is not this operator's: refused like a missing one (the namespaced cache could not read it anyway).
	Namespaces []string
	// SignatureWindow bounds how old (or how far ahead) a signed request's timestamp may be
	// (DefaultSignatureWindow when zero).
	SignatureWindow time.Duration
	// RefusalRate and RefusalBurst limit refused requests per client address, RefusalGlobalRate and
	// RefusalGlobalBurst over all clients (the Default* constants when zero).
	RefusalRate, RefusalGlobalRate   rate.Limit
	RefusalBurst, RefusalGlobalBurst int

	once    sync.Once
	limits  *refusalLimits
	replays replayCache
}

// NeedLeaderElection is false: every replica serves the refresh API.
func (s *RefreshServer) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (s *RefreshServer) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	ctrl.Log.WithName("targetsource-refresh").Info("serving the refresh API", "address", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the refresh API's HTTP handler.
func (s *RefreshServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/namespaces/{namespace}/targetsources/{name}/refresh", s.refresh)
	return mux
}

func (s *RefreshServer) init() {
	s.once.Do(func() {
		s.limits = newRefusalLimits(orLimit(s.RefusalRate, DefaultRefusalRate), orInt(s.RefusalBurst, DefaultRefusalBurst),
			orLimit(s.RefusalGlobalRate, DefaultRefusalGlobalRate), orInt(s.RefusalGlobalBurst, DefaultRefusalGlobalBurst))
	})
}

func orLimit(v, d rate.Limit) rate.Limit {
	if v > 0 {
		return v
	}
	return d
}

func orInt(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

func (s *RefreshServer) window() time.Duration {
	if s.SignatureWindow > 0 {
		return s.SignatureWindow
	}
	return DefaultSignatureWindow
}

func (s *RefreshServer) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// refresh answers every refusal alike (401 "unauthorized"): a missing TargetSource, one outside the watched
// namespaces, one without an enabled, authenticated webhook, a wrong token or signature, a stale timestamp and a
// replayed signature cannot be told apart, so the API does not reveal which TargetSources exist. Each refusal
// costs the caller a token of refusalLimits, taken before anything is read.
func (s *RefreshServer) refresh(w http.ResponseWriter, r *http.Request) {
	s.init()
	ctx := r.Context()
	held, retryAfter, ok := s.limits.reserve(clientAddress(r), s.now())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many refused requests"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRefreshBody+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "reading the body"})
		return
	}
	if len(body) > MaxRefreshBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body larger than 1 MiB"})
		return
	}
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	ts := &gnmicv1alpha1.TargetSource{}
	refused := func() { writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"}) }
	if len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, key.Namespace) {
		refused()
		return
	}
	if err := s.Client.Get(ctx, key, ts); err != nil {
		if apierrors.IsNotFound(err) {
			refused()
			return
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "reading the TargetSource"})
		return
	}
	hook := ts.Spec.Webhook
	if hook == nil || !hook.Enabled || hook.Auth == nil || (hook.Auth.Bearer == nil && hook.Auth.Signature == nil) {
		refused()
		return
	}
	if !s.authorized(ctx, ts.Namespace, hook.Auth, r, body) {
		refused()
		return
	}
	held.cancel(s.now()) // authenticated: not a refusal
	now := s.now()
	debounce := durationOr(hook.Debounce, 5*time.Second)
	if last, err := time.Parse(time.RFC3339Nano, ts.Annotations[gnmicv1alpha1.AnnotationRequestedAt]); err == nil &&
		now.Sub(last) < debounce && !now.Before(last) {
		writeJSON(w, http.StatusOK, map[string]any{"requestedAt": last.Format(time.RFC3339Nano), "debounced": true})
		return
	}
	stamp := now.UTC().Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{gnmicv1alpha1.AnnotationRequestedAt: stamp},
		"resourceVersion": ts.ResourceVersion,
	}})
	if err := s.Client.Patch(ctx, ts, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			// Another replica (or request) just recorded one: that run covers this request.
			writeJSON(w, http.StatusOK, map[string]any{"debounced": true})
			return
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "recording the request"})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"requestedAt": stamp, "debounced": false})
}

// authorized checks every configured method; all must pass.
func (s *RefreshServer) authorized(ctx context.Context, namespace string, auth *gnmicv1alpha1.RefreshAuth, r *http.Request, body []byte) bool {
	read := func(ref gnmicv1alpha1.SecretKeyRef) ([]byte, bool) {
		secret := &corev1.Secret{}
		if err := s.Secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret); err != nil {
			return nil, false
		}
		v, ok := secret.Data[ref.Key]
		return v, ok && len(v) > 0
	}
	if b := auth.Bearer; b != nil {
		want, ok := read(b.SecretRef)
		got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !found || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			return false
		}
	}
	if sig := auth.Signature; sig != nil {
		key, ok := read(sig.SecretRef)
		if !ok {
			return false
		}
		algo := orDefault(sig.Algorithm, "sha256")
		newHash := sha256.New
		if algo == "sha512" {
			newHash = sha512.New
		}
		// The MAC covers "<timestamp>.<body>": a captured request cannot be sent again with a new timestamp.
		stamp := strings.TrimSpace(r.Header.Get(TimestampHeader))
		at, ok := parseTimestamp(stamp)
		now := s.now()
		if !ok || now.Sub(at).Abs() > s.window() {
			return false
		}
		mac := hmac.New(newHash, key)
		mac.Write([]byte(stamp + "."))
		mac.Write(body)
		want := mac.Sum(nil)
		got := strings.TrimSpace(r.Header.Get(orDefault(sig.Header, "X-Hook-Signature")))
		got = strings.TrimPrefix(got, algo+"=")
		decoded, err := hex.DecodeString(got)
		if err != nil || !hmac.Equal(decoded, want) {
			return false
		}
		// Within the window a copy of an accepted request is refused: it is remembered until its timestamp
		// leaves the window (after which the timestamp check refuses it).
		if !s.replays.firstUse(namespace+"/"+r.PathValue("name")+"/"+hex.EncodeToString(want), at.Add(s.window()), now) {
			return false
		}
	}
	return true
}
