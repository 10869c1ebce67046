package gnmic

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// TimestampHeader carries the Unix time (seconds) a signed refresh request was made; the HMAC covers it.
	TimestampHeader = "X-Hook-Timestamp"
	// DefaultSignatureWindow is how far a signed request's timestamp may be from the operator's clock, either
	// way. It bounds replays: a captured request is refused once it is older than this, and within it a second
	// copy of the same signature is refused too (the server remembers the accepted ones that long).
	DefaultSignatureWindow = 5 * time.Minute
	// DefaultRefusalRate and DefaultRefusalBurst limit refused requests per client address: each refused request
	// (and each one in flight) takes a token, an accepted one gives it back. Past the limit the API answers 429
	// before reading anything, so a caller guessing names or secrets costs at most this many Secret reads.
	DefaultRefusalRate = rate.Limit(2)
	// DefaultRefusalBurst is the number of refusals a client address may have before the rate applies.
	DefaultRefusalBurst = 20
	// DefaultRefusalGlobalRate and DefaultRefusalGlobalBurst bound the same over all clients together (callers
	// spread over many addresses).
	DefaultRefusalGlobalRate = rate.Limit(20)
	// DefaultRefusalGlobalBurst is the number of refusals over all clients before the global rate applies.
	DefaultRefusalGlobalBurst = 100
	// maxTrackedClients bounds the per-address limiters kept; past it idle ones are dropped first, and a new
	// address shares the global limit only.
	maxTrackedClients = 4096
)

// refusalLimits rate-limits refused refresh requests per client address and overall.
type refusalLimits struct {
	mu      sync.Mutex
	global  *rate.Limiter
	clients map[string]*rate.Limiter
	limit   rate.Limit
	burst   int
}

func newRefusalLimits(perClient rate.Limit, perClientBurst int, global rate.Limit, globalBurst int) *refusalLimits {
	return &refusalLimits{global: rate.NewLimiter(global, globalBurst), clients: map[string]*rate.Limiter{},
		limit: perClient, burst: perClientBurst}
}

// reservation is the tokens one request holds; cancel gives them back (the request was authenticated).
type reservation []*rate.Reservation

func (r reservation) cancel(now time.Time) {
	for _, res := range r {
		res.CancelAt(now)
	}
}

// reserve takes a token from the client's limiter and the global one; ok is false (nothing taken) when either is
// empty, with how long until it refills.
func (l *refusalLimits) reserve(client string, now time.Time) (res reservation, retryAfter time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limiters := []*rate.Limiter{l.global}
	if c := l.client(client, now); c != nil {
		limiters = append(limiters, c)
	}
	for _, lim := range limiters {
		r := lim.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			res.cancel(now)
			return nil, max(d, time.Second), false
		}
		res = append(res, r)
	}
	return res, 0, true
}

// client is the address's limiter, created on first use; nil when too many addresses are tracked.
func (l *refusalLimits) client(addr string, now time.Time) *rate.Limiter {
	if lim := l.clients[addr]; lim != nil {
		return lim
	}
	if len(l.clients) >= maxTrackedClients {
		// A full bucket has no refusals to remember: dropping it changes nothing.
		for k, lim := range l.clients {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.clients, k)
			}
		}
		if len(l.clients) >= maxTrackedClients {
			return nil
		}
	}
	lim := rate.NewLimiter(l.limit, l.burst)
	l.clients[addr] = lim
	return lim
}

// clientAddress is the request's source IP (no port: one caller's connections share a limit).
func clientAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// replayCache remembers accepted signatures until their timestamp leaves the window, so a captured request is
// accepted at most once.
type replayCache struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// firstUse records signature (of the TargetSource key) as used until expires, and reports whether it was new.
// Expired entries are dropped on the way; only authenticated requests are recorded, so the map grows with the
// legitimate request rate times the window, never with an attacker's guesses.
func (c *replayCache) firstUse(key string, expires, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	for k, until := range c.seen {
		if now.After(until) {
			delete(c.seen, k)
		}
	}
	if _, dup := c.seen[key]; dup {
		return false
	}
	c.seen[key] = expires
	return true
}

// parseTimestamp reads TimestampHeader: whole Unix seconds.
func parseTimestamp(v string) (time.Time, bool) {
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil || sec <= 0 {
		return time.Time{}, false
	}
	return time.Unix(sec, 0), true
}
