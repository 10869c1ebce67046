// Package services holds the rule for tests that need a local service: fail under CI=true, skip elsewhere. It
// imports nothing of the operator, so any package's tests can use it.
package services

import (
	"os"
	"testing"
)

// Missing ends a test that needs a local service or tool it cannot reach (a database, Prometheus, the
// gNMIc binary): under CI=true, where .ci/run provides every one of them, it is a failure; elsewhere the test
// is skipped with the reason, so a developer machine without the service still runs the rest.
func Missing(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true: %v", what, err)
	}
	t.Skipf("%s is not available, so this test cannot run here (CI=true makes this a failure): %v", what, err)
}
