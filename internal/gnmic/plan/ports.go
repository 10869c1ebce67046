package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultPrometheusPort is where gNMIc's prometheus output listens when its config names no port.
const DefaultPrometheusPort = 9804

// assignPrometheusPorts gives every prometheus output instance of the plan its own port: every collector pod runs
// every output, so two outputs on one port (gNMIc's default :9804 for both, say) make the second fail to listen.
// A port the Output's config chooses is kept while free (the instance that held it before, else the first by
// name, keeps a contested one);
// every other instance gets the lowest free port from 9804 up, keeping the host part of its listen address. The
// chosen listen address is written into the output's config and the port recorded for its Service.
//
// An instance without a port of its own keeps the one it had before (previous, by output name) while that is free,
// so an output appearing, even one whose name sorts first, never moves the others' listeners.
func (p *Plan) assignPrometheusPorts(reserved []int32, previous map[string]int32) {
	taken := map[int32]bool{}
	for _, r := range reserved {
		taken[r] = true
	}
	// An instance that held its configured port before claims it first: a split-off instance whose name sorts
	// first must not take the listener of the instance it was split from.
	order := make([]int, len(p.PrometheusOutputs))
	for i := range order {
		order[i] = i
	}
	heldBefore := func(i int) bool {
		po := p.PrometheusOutputs[i]
		_, port, ok := splitListen(p.Config.Outputs[po.Name]["listen"])
		return ok && previous[po.Name] == port
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch ha, hb := heldBefore(a), heldBefore(b); {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	var rest []int
	for _, i := range order {
		po := &p.PrometheusOutputs[i]
		host, port, ok := splitListen(p.Config.Outputs[po.Name]["listen"])
		if ok && !taken[port] {
			taken[port] = true
			po.Port = port
			p.Config.Outputs[po.Name]["listen"] = fmt.Sprintf("%s:%d", host, port)
			continue
		}
		rest = append(rest, i)
	}
	var fresh []int
	for _, i := range rest {
		po := &p.PrometheusOutputs[i]
		if port, ok := previous[po.Name]; ok && port > 0 && !taken[port] {
			taken[port] = true
			host, _, _ := splitListen(p.Config.Outputs[po.Name]["listen"])
			po.Port = port
			p.Config.Outputs[po.Name]["listen"] = fmt.Sprintf("%s:%d", host, port)
			continue
		}
		fresh = append(fresh, i)
	}
	next := int32(DefaultPrometheusPort)
	for _, i := range fresh {
		po := &p.PrometheusOutputs[i]
		for taken[next] {
			next++
		}
		taken[next] = true
		host, _, _ := splitListen(p.Config.Outputs[po.Name]["listen"])
		po.Port = next
		p.Config.Outputs[po.Name]["listen"] = fmt.Sprintf("%s:%d", host, next)
	}
	slices.SortFunc(p.PrometheusOutputs, func(a, b PrometheusOutput) int { return strings.Compare(a.Name, b.Name) })
}

// splitListen reads a listen address ("host:port" or ":port"); ok is false when it names no valid port.
func splitListen(v any) (host string, port int32, ok bool) {
	s, _ := v.(string)
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 || n > 65535 {
		return s[:i], 0, false
	}
	return s[:i], int32(n), true
}
