package pipeline

import (
	"net/url"
	"strings"
)

// RedactURL is a repository URL fit for spans, baggage, annotations, events, logs and errors: without the user
// information of http(s) and git URLs (a token is often written there: https://x-access-token:TOKEN@host/...),
// without an ssh password, and without query or fragment (access_token=...). An ssh user name (git@) is kept: it
// names the account, it does not authenticate it. What cannot be parsed is not shown at all.
func RedactURL(raw string) string {
	s := strings.TrimSpace(raw)
	if s == "" {
		return ""
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return "[unparsable repository URL]"
		}
		if u.User != nil {
			if u.Scheme == "ssh" {
				u.User = url.User(u.User.Username())
			} else {
				u.User = nil
			}
		}
		u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
		return u.String()
	}
	// scp-like: user@host:path; the user of an ssh login is git for every forge, anything else may be a token.
	hostPart, path, ok := strings.Cut(s, ":")
	if !ok || strings.ContainsAny(s, " \t\n") || strings.Contains(hostPart, "/") {
		return "[unparsable repository URL]"
	}
	if _, host, hasUser := strings.Cut(hostPart, "@"); hasUser {
		return "git@" + host + ":" + path
	}
	return s
}

// RedactError replaces every appearance of the raw URL (and of its user information alone) in err's message by
// the redacted URL; err's chain is kept for errors.Is/As.
func RedactError(err error, raw string) error {
	if err == nil || raw == "" {
		return err
	}
	redacted := RedactURL(raw)
	msg := err.Error()
	clean := strings.ReplaceAll(msg, raw, redacted)
	if u, perr := url.Parse(raw); perr == nil && u.User != nil && u.User.String() != "" {
		clean = strings.ReplaceAll(clean, u.User.String(), "[redacted]")
	}
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() error { return e.err }
