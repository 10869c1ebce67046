package registry

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// Every failed write authentication costs a Secret read or a TokenReview against the API server, so failures
// are limited per client address: AuthFailureBurst failures at once, then AuthFailureRate a second. A client
// over its limit is answered 429 before anything is authenticated. AuthFailureGlobalBurst/Rate bound the
// failures of all clients together (many addresses guessing at once). Successes are never limited.
const (
	AuthFailureBurst       = 10
	AuthFailureRate        = 1.0
	AuthFailureGlobalBurst = 100
	AuthFailureGlobalRate  = 20.0
	// maxTrackedClients bounds the per-address buckets kept; full buckets are forgotten first.
	maxTrackedClients = 10000
)

// failureLimiter holds the token buckets of failed authentications.
type failureLimiter struct {
	clock  clock.PassiveClock
	mu     sync.Mutex
	global *rate.Limiter
	byAddr map[string]*rate.Limiter
}

func newFailureLimiter(c clock.PassiveClock) *failureLimiter {
	return &failureLimiter{clock: c, global: rate.NewLimiter(AuthFailureGlobalRate, AuthFailureGlobalBurst),
		byAddr: map[string]*rate.Limiter{}}
}

// clientAddr is the request's peer address without the port.
func clientAddr(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// wait returns how long the client at addr must wait before it may try to authenticate again; zero when it
// may now.
func (l *failureLimiter) wait(addr string) time.Duration {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var w time.Duration
	if b := l.byAddr[addr]; b != nil {
		w = untilOneToken(b, now)
	}
	return max(w, untilOneToken(l.global, now))
}

// failed records a failed authentication of the client at addr.
func (l *failureLimiter) failed(addr string) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.byAddr[addr]
	if b == nil {
		if len(l.byAddr) >= maxTrackedClients {
			l.forgetFull(now)
		}
		b = rate.NewLimiter(AuthFailureRate, AuthFailureBurst)
		l.byAddr[addr] = b
	}
	b.AllowN(now, 1)
	l.global.AllowN(now, 1)
}

// forgetFull drops the buckets that refilled (they hold nothing a new bucket would not); if none did, all go.
func (l *failureLimiter) forgetFull(now time.Time) {
	for a, b := range l.byAddr {
		if b.TokensAt(now) >= AuthFailureBurst {
			delete(l.byAddr, a)
		}
	}
	if len(l.byAddr) >= maxTrackedClients {
		clear(l.byAddr)
	}
}

func untilOneToken(b *rate.Limiter, now time.Time) time.Duration {
	missing := 1 - b.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(b.Limit()) * float64(time.Second))
}

// retryAfter renders a wait as whole seconds for the Retry-After header, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
