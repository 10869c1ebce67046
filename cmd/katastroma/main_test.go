package main

import (
	"flag"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The verify runs inside the provisioner's RPC, so it must end before the RPC deadline cuts the calls waiting for it.
func TestVerifyDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		rpc     time.Duration
		want    time.Duration
		wantErr string
	}{
		{name: "defaults fit", rpc: 5 * time.Minute, want: 3 * time.Minute},
		{name: "off", args: []string{"--verify-timeout=0"}, rpc: 5 * time.Minute, want: -1},
		{name: "default lowered under a small rpc timeout", rpc: 2 * time.Minute, want: 72 * time.Second},
		{name: "explicit below", args: []string{"--verify-timeout=1m"}, rpc: 2 * time.Minute, want: time.Minute},
		{name: "explicit not below is refused", args: []string{"--verify-timeout=2m"}, rpc: 2 * time.Minute,
			wantErr: "--verify-timeout (2m0s) must be below --rpc-timeout (2m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			verify := fs.Duration("verify-timeout", 3*time.Minute, "")
			g.Expect(fs.Parse(tc.args)).To(Succeed())
			got, err := verifyDeadline(fs, *verify, tc.rpc)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
