// Package names reads API discovery on a control plane that serves the operator's CRDs beside OLM's CRDs and OLM's
// aggregated packages API (the real package-server of `make olm`, registered as an APIService), and fails on a
// resource name that two groups answer to. kubectl resolves a plural, singular or short name to the first group
// that serves it (groups of equal priority sort alphabetically), so a shared name makes one group's objects
// unreachable by that name — `kubectl get subscription` must keep reaching OLM's Subscriptions.
package names

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var (
	env *testenv.Env
	// olmBuild is `make olm`'s output: OLM's CRDs and binaries.
	olmBuild string
)

// ownGroups are the API groups this operator serves.
var ownGroups = []string{"agentrax.io", "fleetmanagement.grafana.com", "katastroma.org", "operator.gnmic.dev"}

const (
	// olmGroup is the group of OLM's Subscription, CatalogSource, InstallPlan, ClusterServiceVersion and friends.
	olmGroup = "operators.coreos.com"
	// packagesGroup is the group OLM's package-server serves PackageManifests in.
	packagesGroup = "packages.operators.coreos.com"
)

func TestMain(m *testing.M) {
	dir, err := olmDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "names:", err)
		os.Exit(1)
	}
	olmBuild = dir
	os.Exit(testenv.Main(m, &env, testenv.Options{
		ExtraCRDPaths: []string{filepath.Join(olmBuild, "crds")},
		// The aggregation layer and the Service routing the package-server is reached through.
		Cluster: &testenv.ClusterOptions{},
	}))
}

// olmDir finds `make olm`'s output, package-server included; a missing build (or one from before package-server
// was added to it) fails the package, never skips it.
func olmDir() (string, error) {
	for _, dir := range []string{
		filepath.Join(testenv.RepoRoot(), "bin", "olm"),
		filepath.Join(testenv.CacheDir(), "olm", "v0.42.0"),
	} {
		if _, err := os.Stat(filepath.Join(dir, ".done")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "package-server")); err != nil {
			return "", fmt.Errorf("OLM's build in %s has no package-server: run `make olm` again (make test does)", dir)
		}
		return dir, nil
	}
	return "", errors.New("OLM's CRDs and package-server are not built: run `make olm` (make test does)")
}

// servePackageManifests runs OLM's package-server as the aggregated API packages.operators.coreos.com/v1, as OLM
// installs it, until the test ends.
func servePackageManifests(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server, err := env.StartAggregatedAPI(ctx, testenv.AggregatedAPI{
		Name: "packageserver", Group: packagesGroup, Version: "v1",
		Binary: filepath.Join(olmBuild, "package-server"),
		Args: func(s testenv.AggregatedServing) []string {
			return []string{"--secure-port=" + strconv.Itoa(s.Port), "--bind-address=127.0.0.1",
				"--tls-cert-file=" + s.CertFile, "--tls-private-key-file=" + s.KeyFile,
				"--kubeconfig=" + s.Kubeconfig,
				"--authentication-kubeconfig=" + s.Kubeconfig, "--authorization-kubeconfig=" + s.Kubeconfig,
				"--global-namespace=olm"}
		},
		Timeout: 90 * time.Second,
		// package-server v0.42.0 builds its delegated-authorization options without a kubeconfig (its code assigns
		// --kubeconfig to the authentication options a second time instead), so they read the in-cluster
		// configuration whatever the flags say, and it waits for one forever: it runs as in a pod.
		InCluster: true,
	})
	if err != nil {
		t.Fatalf("starting OLM's package-server: %v", err)
	}
	t.Cleanup(func() {
		if err := server.Stop(); err != nil {
			t.Errorf("stopping the package-server: %v", err)
		}
	})
}

// servedNames maps every plural, singular and short resource name to the groups serving it (subresources skipped).
func servedNames(lists []*metav1.APIResourceList) (map[string][]string, error) {
	byName := map[string][]string{}
	for _, list := range lists {
		gv, err := parseGroup(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			names := append([]string{r.Name, r.SingularName}, r.ShortNames...)
			for _, n := range names {
				if n != "" && !slices.Contains(byName[n], gv) {
					byName[n] = append(byName[n], gv)
				}
			}
		}
	}
	return byName, nil
}

// parseGroup returns the group of "group/version" ("" for the core "v1").
func parseGroup(groupVersion string) (string, error) {
	if groupVersion == "" {
		return "", errors.New("discovery returned a resource list without groupVersion")
	}
	group, _, found := strings.Cut(groupVersion, "/")
	if !found {
		return "", nil
	}
	return group, nil
}

// TestNoResourceNameIsServedByTwoGroupsWhenOneIsOurs: on a cluster with OLM's CRDs and OLM's package-server, none
// of the operator's plural, singular or short names is served by another group. (kubectl matches a Kind through the
// singular name, which CRDs always set, so a Kind alone shadows nothing.) Only clashes with one of our groups fail:
// the others are not ours to rename, and some exist — Kubernetes serves events, event and ev in both the core group
// and events.k8s.io, and OLM's InstallPlan short name ip is also networking.k8s.io's IPAddress — so they are
// logged.
func TestNoResourceNameIsServedByTwoGroupsWhenOneIsOurs(t *testing.T) {
	servePackageManifests(t)
	g := NewWithT(t)
	lists := settledDiscovery(g, packagesGroup)

	byName, err := servedNames(lists)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName).To(HaveKeyWithValue("subscriptions", ContainElement(olmGroup)),
		"OLM's CRDs are not served, so the test would check nothing")
	g.Expect(byName["packagemanifests"]).To(ContainElement(packagesGroup),
		"OLM's package-server is not served, so its names would go unchecked")
	for _, own := range ownGroups {
		g.Expect(slices.ContainsFunc(lists, func(l *metav1.APIResourceList) bool {
			return strings.HasPrefix(l.GroupVersion, own+"/")
		})).To(BeTrue(), "group %s is not served", own)
	}

	var clashes, foreign []string
	for name, groups := range byName {
		if len(groups) < 2 {
			continue
		}
		sort.Strings(groups)
		clash := fmt.Sprintf("%s: %q", name, groups)
		if slices.ContainsFunc(groups, func(gr string) bool { return slices.Contains(ownGroups, gr) }) {
			clashes = append(clashes, clash)
		} else {
			foreign = append(foreign, clash)
		}
	}
	sort.Strings(clashes)
	sort.Strings(foreign)
	t.Logf("names served by more than one group, none of them ours: %v", foreign)
	g.Expect(clashes).To(BeEmpty(), "resource names served by more than one group")
}

// TestNoTwoOwnedKindsShareAKind: the scorecard matches an alm-example to an owned CRD by kind and version only, so
// two of our groups serving one Kind get checked against each other's schema.
func TestNoTwoOwnedKindsShareAKind(t *testing.T) {
	g := NewWithT(t)
	lists := settledDiscovery(g)

	groupsOfKind := map[string][]string{}
	for _, list := range lists {
		group, err := parseGroup(list.GroupVersion)
		g.Expect(err).NotTo(HaveOccurred())
		if !slices.Contains(ownGroups, group) {
			continue
		}
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") && !slices.Contains(groupsOfKind[r.Kind], group) {
				groupsOfKind[r.Kind] = append(groupsOfKind[r.Kind], group)
			}
		}
	}
	g.Expect(groupsOfKind).NotTo(BeEmpty())
	for kind, groups := range groupsOfKind {
		g.Expect(groups).To(HaveLen(1), "kind %s is served by %v", kind, groups)
	}
}

// TestServedNamesFindsAClash is the detector's own table: a name two groups share is reported, subresources are not.
func TestServedNamesFindsAClash(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "operators.coreos.com/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "subscriptions", SingularName: "subscription", Kind: "Subscription", ShortNames: []string{"sub", "subs"}},
			{Name: "subscriptions/status", Kind: "Subscription"},
		}},
		{GroupVersion: "operator.gnmic.dev/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "subscriptions", SingularName: "subscription", Kind: "Subscription"},
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", SingularName: "pod", Kind: "Pod", ShortNames: []string{"po"}}}},
	}
	byName, err := servedNames(lists)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cases := map[string][]string{
		"subscriptions": {"operators.coreos.com", "operator.gnmic.dev"},
		"subscription":  {"operators.coreos.com", "operator.gnmic.dev"},
		"sub":           {"operators.coreos.com"},
		"pods":          {""},
		"po":            {""},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) { NewWithT(t).Expect(byName[name]).To(ConsistOf(want)) })
	}
	NewWithT(t).Expect(byName).NotTo(HaveKey("subscriptions/status"))
}

// settledDiscovery reads every served resource once discovery has settled: an aggregated API (OLM's
// package-server) that was just registered, or is being re-registered, makes discovery fail for a while with
// "stale GroupVersion discovery" although everything else is served. It waits (with a deadline) for a read without
// error that includes each of the wanted groups.
func settledDiscovery(g Gomega, wantGroups ...string) []*metav1.APIResourceList {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	var lists []*metav1.APIResourceList
	g.Eventually(func(g Gomega) {
		var err error
		_, lists, err = dc.ServerGroupsAndResources()
		g.Expect(err).NotTo(HaveOccurred())
		for _, want := range wantGroups {
			g.Expect(slices.ContainsFunc(lists, func(l *metav1.APIResourceList) bool {
				return strings.HasPrefix(l.GroupVersion, want+"/")
			})).To(BeTrue(), "group %s is not served yet", want)
		}
	}, 2*time.Minute, time.Second).Should(Succeed(), "discovery did not settle")
	return lists
}
