package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sign returns the X-Hub-Signature-256 value GitHub sends for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature checks an X-Hub-Signature-256 header in constant time.
func VerifySignature(secret, body []byte, header string) bool {
	want := Sign(secret, body)
	return len(secret) > 0 && hmac.Equal([]byte(header), []byte(want))
}

type pushPayload struct {
	Ref        string `json:"ref"`
	After      string `json:"after"`
	Deleted    bool   `json:"deleted"`
	Forced     bool   `json:"forced"`
	Repository struct {
		CloneURL string `json:"clone_url"`
		SSHURL   string `json:"ssh_url"`
		GitURL   string `json:"git_url"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	Commits []struct {
		Added    []string `json:"added"`
		Removed  []string `json:"removed"`
		Modified []string `json:"modified"`
	} `json:"commits"`
	HeadCommit *struct {
		ID string `json:"id"`
	} `json:"head_commit"`
}

// ParsePush decodes a GitHub push event body.
func ParsePush(body []byte) (Push, error) {
	var p pushPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return Push{}, fmt.Errorf("push payload: %w", err)
	}
	if !strings.HasPrefix(p.Ref, "refs/") {
		return Push{}, fmt.Errorf("push payload: ref %q is not a full ref", p.Ref)
	}
	if !p.Deleted && !isSHA(p.After) {
		return Push{}, fmt.Errorf("push payload: after %q is not a commit SHA", p.After)
	}
	if p.Repository.CloneURL == "" && p.Repository.SSHURL == "" && p.Repository.HTMLURL == "" {
		return Push{}, errors.New("push payload: repository has no URL")
	}
	out := Push{Ref: p.Ref, After: p.After, Deleted: p.Deleted, Forced: p.Forced,
		RepoURLs: []string{p.Repository.CloneURL, p.Repository.SSHURL, p.Repository.GitURL, p.Repository.HTMLURL}}
	for _, c := range p.Commits {
		out.Files = append(out.Files, c.Added...)
		out.Files = append(out.Files, c.Removed...)
		out.Files = append(out.Files, c.Modified...)
	}
	return out, nil
}

func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
