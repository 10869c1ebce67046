package agentrax

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// watchedKinds are every object the agentrax controllers and webhooks write.
var watchedKinds = map[string]schema.GroupVersionKind{
	"AgentDeployment":         {Group: "agentrax.io", Version: "v1alpha1", Kind: "AgentDeploymentList"},
	"TenantQuota":             {Group: "agentrax.io", Version: "v1alpha1", Kind: "TenantQuotaList"},
	"Deployment":              {Group: "apps", Version: "v1", Kind: "DeploymentList"},
	"Service":                 {Group: "", Version: "v1", Kind: "ServiceList"},
	"HorizontalPodAutoscaler": {Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscalerList"},
	"PodMonitor":              {Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitorList"},
}

// writeCounter sees every write to the watched kinds: a metadata-only watch per kind, started at the
// resourceVersion of a list, so no write between the list and the watch is missed.
type writeCounter struct {
	events chan string // kind of each write
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func watchWrites(b *testing.B) *writeCounter {
	b.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &writeCounter{events: make(chan string, 100000), cancel: cancel}
	for kind, gvk := range watchedKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk)
		if err := env.Client.List(ctx, list); err != nil {
			b.Fatal(err)
		}
		rv := list.ResourceVersion
		w.wg.Go(func() {
			for ctx.Err() == nil {
				l := &metav1.PartialObjectMetadataList{}
				l.SetGroupVersionKind(gvk)
				watcher, err := wc.Watch(ctx, l, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
				if err != nil {
					if ctx.Err() == nil {
						b.Errorf("watching %s: %v", kind, err)
					}
					return
				}
				for ev := range watcher.ResultChan() {
					if ev.Type == watch.Error {
						if ctx.Err() != nil {
							return // stopped
						}
						b.Errorf("watching %s: %v", kind, ev.Object)
						watcher.Stop()
						return
					}
					if o, ok := ev.Object.(metav1.Object); ok {
						rv = o.GetResourceVersion() // a closed watch resumes here
					}
					w.events <- kind
				}
			}
		})
	}
	return w
}

func (w *writeCounter) stop() {
	w.cancel()
	w.wg.Wait()
}

// waitQuiet returns once no write was seen for quiet, or fails after limit.
func (w *writeCounter) waitQuiet(b *testing.B, quiet, limit time.Duration) {
	b.Helper()
	deadline := time.After(limit)
	for {
		select {
		case <-w.events:
		case <-time.After(quiet):
			return
		case <-deadline:
			b.Fatalf("writes still going on after %s", limit)
		}
	}
}

// countFor counts the writes seen during window, by kind.
func (w *writeCounter) countFor(window time.Duration) map[string]int {
	out := map[string]int{}
	end := time.After(window)
	for {
		select {
		case kind := <-w.events:
			out[kind]++
		case <-end:
			return out
		}
	}
}

func total(byKind map[string]int, except ...string) int {
	n := 0
	for k, v := range byKind {
		skip := false
		for _, e := range except {
			skip = skip || k == e
		}
		if !skip {
			n += v
		}
	}
	return n
}

// reconciles is how many reconciles the named agentrax controller has finished, from its duration histogram.
func reconciles(b *testing.B, controller string) uint64 {
	b.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != "agentrax_reconcile_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// counter sums the samples of a counter family whose labels include label=value ("" matches every series).
func counter(b *testing.B, name, label, value string) float64 {
	b.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if label == "" || (l.GetName() == label && l.GetValue() == value) {
					n += m.GetCounter().GetValue()
					break
				}
			}
		}
	}
	return n
}

// countChildren counts, metadata only, the objects of kind carrying the agent label.
func countChildren(ctx context.Context, b *testing.B, kind string, sel client.MatchingLabels) int {
	b.Helper()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(watchedKinds[kind])
	if err := env.Client.List(ctx, list, sel); err != nil {
		b.Fatal(err)
	}
	return len(list.Items)
}

func describe(byKind map[string]int) string {
	if len(byKind) == 0 {
		return "none"
	}
	return fmt.Sprint(byKind)
}
