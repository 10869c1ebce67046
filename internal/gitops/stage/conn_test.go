package stage

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestConnectionDefaults(t *testing.T) {
	for name, tc := range map[string]struct{ in, want Connection }{
		"unset": {Connection{}, DefaultConnection},
		"a longer deadline stretches the grace": {Connection{RPCTimeout: 20 * time.Minute},
			Connection{RPCTimeout: 20 * time.Minute, KeepaliveTime: 30 * time.Second, KeepaliveTimeout: 10 * time.Second,
				MaxConnectionAge: 2 * time.Minute, MaxConnectionAgeGrace: 20 * time.Minute}},
		"explicit values stay": {Connection{RPCTimeout: time.Minute, KeepaliveTime: time.Minute,
			KeepaliveTimeout: time.Second, MaxConnectionAge: time.Hour, MaxConnectionAgeGrace: time.Second},
			Connection{RPCTimeout: time.Minute, KeepaliveTime: time.Minute, KeepaliveTimeout: time.Second,
				MaxConnectionAge: time.Hour, MaxConnectionAgeGrace: time.Second}},
	} {
		t.Run(name, func(t *testing.T) { NewWithT(t).Expect(tc.in.WithDefaults()).To(Equal(tc.want)) })
	}
}

func TestTarget(t *testing.T) {
	for in, want := range map[string]string{
		"katastroma-orderer.ns.svc:50051":        "dns:///katastroma-orderer.ns.svc:50051",
		"127.0.0.1:4000":                         "dns:///127.0.0.1:4000",
		"dns:///katastroma-orderer.ns.svc:50051": "dns:///katastroma-orderer.ns.svc:50051",
		"test:///orderer":                        "test:///orderer",
		"unix:/run/katastroma.sock":              "unix:/run/katastroma.sock",
	} {
		NewWithT(t).Expect(Target(in)).To(Equal(want), in)
	}
}
