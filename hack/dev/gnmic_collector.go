package main

import (
	"context"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// devCollector is the optional local gNMIc collector of `make dev` (QUARTET_DEV_GNMIC_COLLECTOR=true): a collector
// test server on loopback that the sample Cluster pushes its Targets to.
type devCollector struct {
	server *gnmicserver.Server
}

// startDevCollector starts the collector when asked to, and lets Clusters point at it (the URL override is a
// development-only switch). It must run before the manager starts.
func startDevCollector() (*devCollector, error) {
	if os.Getenv("QUARTET_DEV_GNMIC_COLLECTOR") != "true" {
		return nil, nil
	}
	s, err := gnmicserver.Start(envOr("QUARTET_DEV_GNMIC_COLLECTOR_ADDRESS", "127.0.0.1:7890"))
	if err != nil {
		return nil, fmt.Errorf("starting the local gNMIc collector: %w", err)
	}
	if err := os.Setenv("QUARTET_GNMIC_COLLECTOR_URL_OVERRIDE", "true"); err != nil {
		return nil, err
	}
	fmt.Printf("make dev: local gNMIc collector (test server) on %s\n", s.URL())
	return &devCollector{server: s}, nil
}

// attach points the sample Cluster "core" at the local collector with one replica, and reports its StatefulSet
// ready (there is no kubelet).
func (d *devCollector) attach(ctx context.Context, c client.Client) error {
	if d == nil {
		return nil
	}
	cluster := &gnmicv1alpha1.Cluster{}
	key := types.NamespacedName{Namespace: "default", Name: "core"}
	if err := c.Get(ctx, key, cluster); err != nil {
		return client.IgnoreNotFound(err)
	}
	one := int32(1)
	cluster.Spec.Replicas = &one
	if cluster.Annotations == nil {
		cluster.Annotations = map[string]string{}
	}
	cluster.Annotations[gnmicv1alpha1.ClusterCollectorURLsAnnotation] = "0=" + d.server.URL()
	if err := c.Update(ctx, cluster); err != nil {
		return err
	}
	sts := &appsv1.StatefulSet{}
	for ctx.Err() == nil {
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "gnmic-core"}, sts); err == nil &&
			sts.Spec.Replicas != nil && *sts.Spec.Replicas == 1 {
			sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.ObservedGeneration = 1, 1, sts.Generation
			if err := c.Status().Update(ctx, sts); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
		case <-sleep():
		}
	}
	return ctx.Err()
}

func (d *devCollector) close() {
	if d != nil {
		_ = d.server.Close()
	}
}

func sleep() <-chan time.Time { return time.After(200 * time.Millisecond) }
