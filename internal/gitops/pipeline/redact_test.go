package pipeline

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/baggage"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/org/repo.git":                           "https://github.com/org/repo.git",
		"https://x-access-token:ghp_SECRET@github.com/org/repo.git": "https://github.com/org/repo.git",
		"https://ghp_SECRET@github.com/org/repo.git":                "https://github.com/org/repo.git",
		"https://github.com/org/repo.git?access_token=ghp_SECRET#x": "https://github.com/org/repo.git",
		"ssh://git@github.com/org/repo.git":                         "ssh://git@github.com/org/repo.git",
		"ssh://git:ghp_SECRET@github.com/org/repo.git":              "ssh://git@github.com/org/repo.git",
		"git@github.com:org/repo.git":                               "git@github.com:org/repo.git",
		"ghp_SECRET@github.com:org/repo.git":                        "git@github.com:org/repo.git",
		"not a url ghp_SECRET":                                      "[unparsable repository URL]",
		"":                                                          "",
	} {
		NewWithT(t).Expect(RedactURL(in)).To(Equal(want), in)
	}
}

// TestBaggageCarriesNoCredentials: a token written into repo-url never reaches the baggage every stage receives.
func TestBaggageCarriesNoCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx, err := WithContext(context.Background(), Context{Tenant: "t", RepoURL: "https://x:ghp_SECRET@github.com/o/r.git"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(baggage.FromContext(ctx).String()).NotTo(ContainSubstring("ghp_SECRET"))
	g.Expect(FromContext(ctx).RepoURL).To(Equal("https://github.com/o/r.git"))

	g.Expect(RedactError(errors.New(`fetching https://x:ghp_SECRET@github.com/o/r.git: auth failed`), "https://x:ghp_SECRET@github.com/o/r.git")).
		To(MatchError(`fetching https://github.com/o/r.git: auth failed`))
}
