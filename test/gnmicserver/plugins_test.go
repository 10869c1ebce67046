package gnmicserver

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestPluginConfigsDecodeAsTheirPluginsDo(t *testing.T) {
	g := NewWithT(t)
	s := start(t)
	code, body := post(t, s.URL()+"/api/v1/config/apply", `{"outputs":{
	    "k":{"type":"kafka","address":"bus:9092","Topic":"t","addr":"typo","timeout":"5s","max-retry":3,"event-processors":["p"]},
	    "bad":{"type":"nats","num-workers":"two"}},
	  "processors":{"p":{"event-strings":{"value-names":["^x$"],"value-name":"y","debug":true}},
	    "q":{"event-nope":{}}}}`)
	// gNMIc stores the configs and starts the plugins afterwards, so the apply succeeds even where a plugin fails.
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(s.Unused()).To(ConsistOf("outputs[k].addr", "processors[p].event-strings.value-name"))
	g.Expect(s.PluginErrors()).To(HaveExactElements(
		And(HavePrefix("outputs[bad]: nats:"), ContainSubstring(`'num-workers' expected type 'int64', got unconvertible type 'string'`)),
		`processors[q]: unknown event processor type "event-nope"`))

	d, err := DecodeApply(strings.NewReader(`{"outputs":{"k":{"type":"kafka","address":"bus:9092","Topic":"t","timeout":"5s","max-retry":3}}}`), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Outputs["k"].Values).To(Equal(map[string]any{"address": "bus:9092", "topic": "t",
		"timeout": 5 * time.Second, "max-retry": int64(3)}), "mapstructure matches Topic to topic")
}

func TestPluginKeysFollowTheCollectorVersion(t *testing.T) {
	body := `{"outputs":{"k":{"type":"kafka","kafka-version":"3.6.0"}},"processors":{"e":{"event-time-epoch":{"precision":"ms"}}}}`
	for version, current := range map[string]bool{"0.45.0": false, "0.47.0": true, "": true} {
		d, err := DecodeApply(strings.NewReader(body), version)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if current {
			NewWithT(t).Expect(d.Unused).To(BeEmpty(), version)
			NewWithT(t).Expect(d.PluginErrors).To(BeEmpty(), version)
		} else {
			// The stand-in knows gNMIc v0.37.0's plugins below 0.47: what v0.47.0 added is unknown there.
			NewWithT(t).Expect(d.Unused).To(ConsistOf("outputs[k].kafka-version"), version)
			NewWithT(t).Expect(d.PluginErrors).To(ConsistOf(`processors[e]: unknown event processor type "event-time-epoch"`), version)
		}
	}
}
