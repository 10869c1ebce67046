package pharos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// env is a real API server for the ConfigMap persister.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	e, err := testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	return m.Run()
}

func TestRestartWithConfigMapPersisterLosesNothing(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	key := types.NamespacedName{Namespace: "default", Name: "pharos-state-restart"}
	o := testOptions(src.addr)
	// Long enough that the first pharos never replays before it is stopped, even on a loaded machine.
	o.CrashTimeout = 10 * time.Second
	o.Persister = &ConfigMapPersister{Client: env.Client, Key: key}

	first, stopFirst := startPharos(t, o)
	tr := tracerTo(t, grpcExporter(t, first), src.addr)
	src.setTracer(tr)
	// running: a downstream stage's span ended, the root has not; finished: the whole event succeeded.
	ctx, running := tr.Start(context.Background(), RootSpanName, trace.WithNewRoot())
	_, render := tr.Start(ctx, "render")
	render.End()
	ctx, finished := tr.Start(context.Background(), RootSpanName, trace.WithNewRoot())
	_, finishedTarget := tr.Start(ctx, SourceTargetSpanName)
	finishedTarget.End()
	finished.End()
	runningID, finishedID := running.SpanContext().TraceID().String(), finished.SpanContext().TraceID().String()
	g.Eventually(func(g Gomega) {
		g.Expect(eventOf(g, first, runningID).State).To(Equal(Running))
		g.Expect(eventOf(g, first, finishedID).State).To(Equal(Done))
	}).Should(Succeed())
	stopFirst()
	g.Expect(src.Calls()).To(BeEmpty(), "the first pharos stopped before the crash timeout")
	src.setTracer(nil) // replays wait for the second pharos's tracer

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), key, cm)).To(Succeed())
	var saved []Event
	g.Expect(json.Unmarshal([]byte(cm.Data[ConfigMapKey]), &saved)).To(Succeed())
	g.Expect(saved).To(ConsistOf(
		HaveField("ID", runningID), HaveField("ID", finishedID)))

	second, _ := startPharos(t, o)
	tr = tracerTo(t, grpcExporter(t, second), src.addr)
	src.setTracer(tr)
	// A late span of the finished event must not look like a new, unfinished one.
	_, late := tr.Start(trace.ContextWithSpanContext(context.Background(), finished.SpanContext()), "prune")
	late.End()

	g.Eventually(src.Calls).WithTimeout(30*time.Second).Should(Equal([]string{runningID}),
		"the restarted pharos still knows the running event")
	g.Eventually(func(g Gomega) { g.Expect(eventOf(g, second, runningID).State).To(Equal(Done)) }).Should(Succeed())
	g.Consistently(src.Calls, 500*time.Millisecond).Should(HaveLen(1))
	g.Expect(eventOf(g, second, finishedID).State).To(Equal(Done))
}
