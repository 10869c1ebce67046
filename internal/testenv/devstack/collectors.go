package devstack

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// Collectors are local gNMIc collectors: one collector test server on loopback for each pod of the sample Cluster
// "core". The pods are simulated (kwok runs no container), so the operator's connections to the pods' addresses are
// sent to these servers (QUARTET_DEV_DIAL_MAP, a development-only switch) while the StatefulSet is run by the real
// controllers. The sample Cluster's REST API is mutual TLS (the default), so the servers serve HTTPS with the
// certificate the operator issues once Follow has found it.
type Collectors struct {
	Servers []*gnmicserver.Server
}

// StartCollectors starts replicas collector stand-ins on loopback, waiting for their certificate (Follow).
func StartCollectors(replicas int) (*Collectors, error) {
	d := &Collectors{}
	for range replicas {
		s, err := gnmicserver.StartTLSPending("127.0.0.1:0")
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("starting a local gNMIc collector: %w", err)
		}
		d.Servers = append(d.Servers, s)
	}
	return d, nil
}

// Follow gives the servers the sample Cluster's REST API certificate (Secret gnmic-core-api-tls in default, with
// its CA as the client CA, as the collector pods mount it) whenever it appears or changes, until ctx ends: a
// renewal restarts them, as it rolls the pods. It returns at once; nothing happens when d is nil.
func (d *Collectors) Follow(ctx context.Context, c client.Reader) {
	if d == nil {
		return
	}
	go func() {
		var served []byte
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			s := &corev1.Secret{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "gnmic-core-api-tls"}, s); err == nil &&
				len(s.Data[corev1.TLSCertKey]) > 0 && !bytes.Equal(s.Data[corev1.TLSCertKey], served) {
				ok := true
				for _, srv := range d.Servers {
					ok = srv.Restart(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], s.Data["ca.crt"]) == nil && ok
				}
				if ok {
					served = s.Data[corev1.TLSCertKey]
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
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
