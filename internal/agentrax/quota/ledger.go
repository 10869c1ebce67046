package quota

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// The ledger is stored in TenantQuota.status.ledger as one compact string, not as a list of objects, because
// every admission rewrites it: the API server decodes, validates, tracks managed fields of and stores the whole
// TenantQuota on each write, and with a list of ~100 four-field objects that cost several times a plain
// ConfigMap write. As one string of about 25 bytes per agent, the write is a small object with one leaf field.
//
// Format: entries "name=replicas/gpus@unixSeconds" joined by ",", sorted by name, names unique; "" is the
// empty ledger. Example: "agent-a=3/3@1764601800,agent-b=1/0@1764601801". The CRD's pattern on the field
// (LedgerPattern) makes the API server refuse anything else, so a hand edit cannot corrupt it silently.

// LedgerPattern is the schema pattern of status.ledger; ParseLedger additionally refuses duplicate names and
// numbers out of range.
const LedgerPattern = `^$|^[a-z0-9][-a-z0-9.]*=[0-9]+/[0-9]+@[0-9]+(,[a-z0-9][-a-z0-9.]*=[0-9]+/[0-9]+@[0-9]+)*$`

// ParseLedger decodes status.ledger into reservations sorted by name (nil for "").
func ParseLedger(s string) ([]agentraxv1alpha1.Reservation, error) {
	if s == "" {
		return nil, nil
	}
	out := make([]agentraxv1alpha1.Reservation, 0, strings.Count(s, ",")+1)
	for entry := range strings.SplitSeq(s, ",") {
		r, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("status.ledger entry %d %q: %w", len(out)+1, entry, err)
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b agentraxv1alpha1.Reservation) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			return nil, fmt.Errorf("status.ledger: %q is reserved twice", out[i].Name)
		}
	}
	return out, nil
}

func parseEntry(entry string) (agentraxv1alpha1.Reservation, error) {
	name, rest, ok := strings.Cut(entry, "=")
	if !ok {
		return agentraxv1alpha1.Reservation{}, fmt.Errorf(`want "name=replicas/gpus@unixSeconds"`)
	}
	if err := checkName(name); err != nil {
		return agentraxv1alpha1.Reservation{}, err
	}
	return parseAmounts(name, rest)
}

func parseAmounts(name, rest string) (agentraxv1alpha1.Reservation, error) {
	replicas, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return agentraxv1alpha1.Reservation{}, fmt.Errorf(`missing "/" between replicas and gpus`)
	}
	gpus, at, ok := strings.Cut(rest, "@")
	if !ok {
		return agentraxv1alpha1.Reservation{}, fmt.Errorf(`missing "@" before the reservation time`)
	}
	r, err := strconv.ParseUint(replicas, 10, 31)
	if err != nil {
		return agentraxv1alpha1.Reservation{}, fmt.Errorf("replicas: %w", err)
	}
	gp, err := strconv.ParseUint(gpus, 10, 63)
	if err != nil {
		return agentraxv1alpha1.Reservation{}, fmt.Errorf("gpus: %w", err)
	}
	// Bounded so that time.Unix and the RFC 3339 rendering of metav1.Time stay within year 9999.
	sec, err := strconv.ParseUint(at, 10, 38)
	if err != nil || sec > maxUnixSeconds {
		return agentraxv1alpha1.Reservation{}, fmt.Errorf("reservation time: not unix seconds up to %d", maxUnixSeconds)
	}
	return agentraxv1alpha1.Reservation{Name: name, Replicas: int32(r), GPUs: int64(gp),
		ReservedAt: metav1.NewTime(time.Unix(int64(sec), 0).UTC())}, nil
}

// maxUnixSeconds is 9999-12-31T23:59:59Z.
const maxUnixSeconds = 253402300799

// checkName accepts the characters of a DNS subdomain (AgentDeployment names); it keeps the separators out.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty name")
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '.') {
			return fmt.Errorf("name %q: only lowercase letters, digits, '-' and '.' (not first)", name)
		}
	}
	return nil
}

// FormatLedger encodes reservations (any order; names unique and valid, counts and times not negative) as
// status.ledger, sorted by name.
func FormatLedger(ledger []agentraxv1alpha1.Reservation) string {
	if len(ledger) == 0 {
		return ""
	}
	sorted := slices.IsSortedFunc(ledger, func(a, b agentraxv1alpha1.Reservation) int { return strings.Compare(a.Name, b.Name) })
	if !sorted {
		ledger = slices.Clone(ledger)
		slices.SortStableFunc(ledger, func(a, b agentraxv1alpha1.Reservation) int { return strings.Compare(a.Name, b.Name) })
	}
	var b strings.Builder
	b.Grow(len(ledger) * 32)
	for i, r := range ledger {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.Name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(int64(max(r.Replicas, 0)), 10))
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(max(r.GPUs, 0), 10))
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(min(max(r.ReservedAt.Unix(), 0), maxUnixSeconds), 10))
	}
	return b.String()
}
