package manager

import (
	"context"
	"flag"
	"io"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/quartet-dev/quartet-operator/internal/devdial"
)

func TestPeerDial(t *testing.T) {
	given := func() *devdial.Map {
		m, err := devdial.Parse("a.ns.svc:80=127.0.0.1:8080")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name, env string
		given     *devdial.Map
		want      string // String() of the map the manager dials through; "nil" for none
		err       string
	}{
		{name: "unset: plain dialing", want: "nil"},
		{name: "from the environment", env: "*.svc:*=127.0.0.1", want: "*.svc:*=127.0.0.1"},
		{name: "given by a test", given: given(), want: "a.ns.svc:80=127.0.0.1:8080"},
		{name: "the environment's entries are added to the given map", env: "*.svc:*=127.0.0.1", given: given(),
			want: "a.ns.svc:80=127.0.0.1:8080,*.svc:*=127.0.0.1"},
		{name: "a bad entry is named", env: "*.svc:*=127.0.0.1, a.ns.svc=127.0.0.1:1",
			err: `QUARTET_DEV_DIAL_MAP entry "a.ns.svc=127.0.0.1:1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(devdial.EnvVar, tc.env)
			o := DefaultOptions()
			o.DevDialMap = tc.given
			m, err := o.peerDial()
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			if tc.want == "nil" {
				g.Expect(m).To(BeNil())
				return
			}
			g.Expect(m.String()).To(Equal(tc.want))
		})
	}
}

// The manager refuses to start with a bad map rather than dialing somewhere unexpected.
func TestNewRefusesABadDialMap(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(devdial.EnvVar, "collector:7890")
	_, err := New(context.Background(), &rest.Config{Host: "http://127.0.0.1:1"}, DefaultOptions())
	g.Expect(err).To(MatchError(ContainSubstring(`QUARTET_DEV_DIAL_MAP entry "collector:7890"`)))
}

// The ad-hoc ways of reaching local stand-ins are gone: the dial map is the one.
func TestRegistryHostMapFlagIsGone(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.BindFlags(fs)
	NewWithT(t).Expect(fs.Parse([]string{"--registry-host-map=*=127.0.0.1"})).To(
		MatchError(ContainSubstring("flag provided but not defined: -registry-host-map")))
}
