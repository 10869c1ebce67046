package asinstalled

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/quartet-dev/quartet-operator/internal/guard"
	"github.com/quartet-dev/quartet-operator/internal/testenv/escalation"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the checks read.
type auditEvent struct {
	Verb           string                    `json:"verb"`
	RequestURI     string                    `json:"requestURI"`
	User           struct{ Username string } `json:"user"`
	UserAgent      string                    `json:"userAgent"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// AuditedAnswers counts user's audited requests and lists those answered 403. The escalation attempts
// (TryEscalations, user agent escalation.UserAgent) and the manager's probe of its escalation guard
// (guard.ProbeUserAgent) are refused on purpose and not counted.
func AuditedAnswers(path, user string) (int, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = f.Close() }()
	var requests int
	var forbidden []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return 0, nil, fmt.Errorf("audit log line: %w", err)
		}
		if e.User.Username != user || e.UserAgent == escalation.UserAgent || e.UserAgent == guard.ProbeUserAgent {
			continue
		}
		requests++
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
			forbidden = append(forbidden, e.Verb+" "+e.RequestURI)
		}
	}
	return requests, forbidden, scanner.Err()
}
