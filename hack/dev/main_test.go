package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

// The samples `make dev` applies run through every webhook with every controller enabled, as in `make dev`.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{Controllers: testenv.AllControllers()}))
}

func TestEverySampleIsAdmitted(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(testenv.RepoRoot(), "config", "samples")
	applied, err := testenv.ApplySamples(context.Background(), env.Client, dir, "default", "make-dev")
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(applied).To(BeNumerically(">=", len(files)-1), "every sample file listed in kustomization.yaml is applied")

	// Applying again is a no-op for the API server, as `make dev` restarts rely on.
	again, err := testenv.ApplySamples(context.Background(), env.Client, dir, "default", "make-dev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(applied))
}
