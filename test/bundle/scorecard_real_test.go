package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	scapiv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// scorecardVersion is the operator-sdk release whose scorecard-test binary runs here (OPERATOR_SDK_VERSION in the
// Makefile); the scorecard config in the bundle must name the image of the same release.
const scorecardVersion = "v1.42.2"

// podBundleRoot is where the scorecard-test binary reads the bundle: the path the scorecard mounts it at in its pod.
const podBundleRoot = "/bundle"

// scorecardBinary finds `make scorecard-test`'s output: bin/, then the tool cache. Missing fails, never skips.
func scorecardBinary(t *testing.T) string {
	t.Helper()
	name := "scorecard-test-" + scorecardVersion
	for _, p := range []string{repoPath("bin", name), filepath.Join(testenv.CacheDir(), "tools", name)} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not built: run `make scorecard-test` (make test does)", name)
	return ""
}

// scorecardTests reads bundle/tests/scorecard/config.yaml: the scorecard-test argument of every configured test.
func scorecardTests(t *testing.T) []string {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(repoPath("bundle", "tests", "scorecard", "config.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var cfg scapiv1alpha3.Configuration
	g.Expect(yaml.UnmarshalStrict(data, &cfg)).To(Succeed())
	var names []string
	for _, stage := range cfg.Stages {
		for _, test := range stage.Tests {
			g.Expect(test.Image).To(Equal("quay.io/operator-framework/scorecard-test:"+scorecardVersion),
				"%v: the binary run here is %s's", test.Entrypoint, scorecardVersion)
			g.Expect(test.Entrypoint).To(HaveLen(2))
			g.Expect(test.Entrypoint[0]).To(Equal("scorecard-test"))
			names = append(names, test.Entrypoint[1])
		}
	}
	return names
}

// scorecardRoot builds a root directory holding the binary and a copy of bundle/ at /bundle, for a chroot: the
// binary's bundle path is fixed, and a chroot (or a private mount namespace) is how to give it one without touching
// the host's /.
func scorecardRoot(t *testing.T, binary string) string {
	t.Helper()
	root := t.TempDir()
	g := NewWithT(t)
	g.Expect(copyTree(repoPath("bundle"), filepath.Join(root, podBundleRoot))).To(Succeed())
	g.Expect(testenv.CopyFile(binary, filepath.Join(root, "scorecard-test"), 0o755)).To(Succeed())
	return root
}

// runScorecardTest runs one scorecard test chrooted into root; as a non-root user it maps itself to root in a new
// user namespace, which grants chroot inside it.
func runScorecardTest(root, name string) (scapiv1alpha3.TestStatus, error) {
	var status scapiv1alpha3.TestStatus
	cmd := exec.Command("/scorecard-test", name)
	cmd.Dir = "/"
	cmd.Env = []string{}
	attr := &syscall.SysProcAttr{Chroot: root}
	if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	}
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return status, fmt.Errorf("scorecard-test %s: %w; stderr: %s", name, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &status); err != nil {
		return status, fmt.Errorf("scorecard-test %s printed no TestStatus: %w; stdout: %s", name, err, stdout.String())
	}
	return status, nil
}

// TestRealScorecard runs operator-sdk's own scorecard-test binary (the one its scorecard-test image runs) on
// bundle/ for every test of the bundle's scorecard config — the six tests of the basic and olm suites — and each
// must pass with no error.
func TestRealScorecard(t *testing.T) {
	names := scorecardTests(t)
	NewWithT(t).Expect(names).To(ConsistOf(
		"basic-check-spec", "olm-bundle-validation", "olm-crds-have-validation",
		"olm-crds-have-resources", "olm-spec-descriptors", "olm-status-descriptors"))
	root := scorecardRoot(t, scorecardBinary(t))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			status, err := runScorecardTest(root, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status.Results).To(HaveLen(1))
			r := status.Results[0]
			g.Expect(r.Name).To(Equal(name), "the binary ran another test: %v", r.Errors)
			g.Expect(r.Errors).To(BeEmpty(), "log:\n%s", r.Log)
			g.Expect(r.State).To(Equal(scapiv1alpha3.PassState), "log:\n%s", r.Log)
		})
	}
}

// TestRealScorecardReportsAFailure proves the harness sees the binary fail: an alm-example with a spec key its
// CRD's schema lacks (what the gNMIc Pipeline's keys were to the fleet Pipeline's schema while both were Kind
// Pipeline) fails olm-crds-have-validation.
func TestRealScorecardReportsAFailure(t *testing.T) {
	g := NewWithT(t)
	root := scorecardRoot(t, scorecardBinary(t))
	csvPath := filepath.Join(root, podBundleRoot, "manifests", "quartet-operator.clusterserviceversion.yaml")
	data, err := os.ReadFile(csvPath)
	g.Expect(err).NotTo(HaveOccurred())
	const fleetPipeline, firstSpecKey = `"kind": "Pipeline",`, `"configType": "Alloy",`
	i := strings.Index(string(data), fleetPipeline)
	g.Expect(i).To(BeNumerically(">=", 0))
	j := strings.Index(string(data[i:]), firstSpecKey)
	g.Expect(j).To(BeNumerically(">=", 0))
	broken := string(data[:i+j]) + `"clusterRef": "core", ` + string(data[i+j:])
	g.Expect(os.WriteFile(csvPath, []byte(broken), 0o644)).To(Succeed())

	status, err := runScorecardTest(root, "olm-crds-have-validation")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Results).To(HaveLen(1))
	g.Expect(status.Results[0].State).To(Equal(scapiv1alpha3.FailState), "log:\n%s", status.Results[0].Log)
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return testenv.CopyFile(path, target, 0o644)
		default:
			return errors.New(path + ": only files and directories belong in a bundle")
		}
	})
}
