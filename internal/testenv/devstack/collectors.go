package devstack

import (
	"fmt"

	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// Collectors are local gNMIc collectors: one collector test server on loopback for each pod of the sample Cluster
// "core". The pods are simulated (kwok runs no container), so the operator's connections to the pods' addresses are
// sent to these servers (QUARTET_DEV_DIAL_MAP, a development-only switch) while the StatefulSet is run by the real
// controllers.
type Collectors struct {
	Servers []*gnmicserver.Server
}

// StartCollectors starts replicas collector stand-ins on loopback.
func StartCollectors(replicas int) (*Collectors, error) {
	d := &Collectors{}
	for range replicas {
		s, err := gnmicserver.Start("127.0.0.1:0")
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("starting a local gNMIc collector: %w", err)
		}
		d.Servers = append(d.Servers, s)
	}
	return d, nil
}

// DialEntries are the QUARTET_DEV_DIAL_MAP entries that send the operator's connections to the sample Cluster's pods
// (default/core, REST port 7890) to these servers; none when d is nil.
func (d *Collectors) DialEntries() string {
	if d == nil {
		return ""
	}
	return gnmicserver.ServerDialMapEntries("default", "core", 7890, d.Servers)
}

// Close stops the stand-ins.
func (d *Collectors) Close() {
	if d == nil {
		return
	}
	for _, s := range d.Servers {
		_ = s.Close()
	}
}
