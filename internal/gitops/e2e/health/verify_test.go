package health

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// provisionerAs grants what a Platform and a Tenant grant (the shipped provisioner ClusterRole bound to the
// Platform's ServiceAccount, the tenant's provisioner identity with the default tenant resources) and returns a
// rest config holding a TokenRequest token of the Platform's provisioner ServiceAccount: no admin in the stage.
func provisionerAs(ctx context.Context, tenantNS string) *rest.Config {
	c := env.Client
	Expect(testenv.ApplyShippedClusterRoles(ctx, c)).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: "platform-" + rand.String(6), Name: "p"}}
	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})).To(Succeed())
	st := gitopsv1alpha1.StageProvisioner
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: platform.Name(st)}}
	Expect(c.Create(ctx, sa)).To(Succeed())
	Expect(testenv.BindStage(ctx, c, p, st)).To(Succeed())
	tr := &authenticationv1.TokenRequest{}
	Expect(c.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token

	tsa := gitopsv1alpha1.ProvisionerServiceAccount
	Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: tsa}})).To(Succeed())
	name := "katastroma-" + tsa
	Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name},
		Rules: tenancy.Rules(nil, tenancy.ProvisionerVerbs)})).To(Succeed())
	Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tsa, Namespace: tenantNS}}})).To(Succeed())
	return cfg
}

// deployment is a Deployment the restricted Pod Security level admits; extra is appended to its pod spec.
func deployment(name string, spec, podSpec string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
%[2]s
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: app
        image: registry.example/app:1
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
%[3]s
`, name, spec, podSpec)
}

// provision runs one Provision of manifests for a fresh tenant namespace and source target, through a
// provisioner started as its Platform identity with the given verify timeout, and returns the tenant namespace,
// the provisioner span and the call's error. A callTimeout above zero is the call's deadline, as the source
// handler's --rpc-timeout sets one.
func provision(t *testing.T, verifyTimeout, callTimeout time.Duration, manifests ...string) (string, tracetest.SpanStub, error) {
	return provisionWith(t, verifyTimeout, callTimeout, nil, manifests...)
}

// provisionWith is provision with gRPC metadata the source handler would send (e.g. the target's verify timeout).
func provisionWith(t *testing.T, verifyTimeout, callTimeout time.Duration, md map[string]string,
	manifests ...string) (string, tracetest.SpanStub, error) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := "tenant-" + rand.String(6)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{pipeline.LabelTenant: "team-" + ns[7:]}}})).To(Succeed())
	cfg := provisionerAs(ctx, ns)
	leaseID := rand.String(16)
	Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
		Labels:      map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget},
		Annotations: map[string]string{pipeline.AnnotationLeaseID: pipeline.LeaseRef(leaseID)}}})).To(Succeed())

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	r, err := runner.Start(ctx, runner.Provisioner, runner.Options{Listener: lis, Config: cfg,
		Scheme: operator.NewScheme(), VerifyTimeout: verifyTimeout, VerifyInterval: 200 * time.Millisecond})
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { cancel(); _ = r.Wait() })
	conn, err := stage.Dial(r.GRPCAddr)
	Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })

	var msgs []*katastromav1.Manifest
	for _, m := range manifests {
		objs, err := pipeline.SplitYAML([]byte(m))
		Expect(err).NotTo(HaveOccurred())
		for _, u := range objs {
			// What the labeler adds: the verify lists the applied objects by it.
			u.SetLabels(map[string]string{pipeline.LabelSourceTarget: ns + ".web"})
			msg, err := pipeline.Encode(u)
			Expect(err).NotTo(HaveOccurred())
			msgs = append(msgs, msg)
		}
	}
	cctx, err := pipeline.WithContext(ctx, pipeline.Context{Tenant: "team", Namespace: ns, SourceTarget: "web",
		Commit: "c1", LeaseID: leaseID, EventID: rand.String(8)})
	Expect(err).NotTo(HaveOccurred())
	for k, v := range md {
		cctx = metadata.AppendToOutgoingContext(cctx, k, v)
	}
	// The call's own trace identifies its provisioner span.
	cctx, call := otel.Tracer("health-test").Start(cctx, "call")
	if callTimeout > 0 {
		var cancelCall context.CancelFunc
		cctx, cancelCall = context.WithTimeout(cctx, callTimeout)
		defer cancelCall()
	}
	_, perr := stage.Forward(cctx, katastromav1.NewProvisionerServiceClient(conn).Provision, msgs)
	call.End()
	var span tracetest.SpanStub
	Eventually(func(g Gomega) {
		var found []tracetest.SpanStub
		for _, s := range spans.GetSpans() {
			if s.Name == "provisioner" && s.SpanContext.TraceID() == call.SpanContext().TraceID() {
				found = append(found, s)
			}
		}
		g.Expect(found).To(HaveLen(1))
		span = found[0]
	}).Should(Succeed())
	return ns, span, perr
}

// verifies reads katastroma_provisioner_verifies_total{tenant="team",outcome} from the registry the stage serves.
func verifies(outcome string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "katastroma_provisioner_verifies_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tenant"] == "team" && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// healthEvents lists the verify span events as "Kind/name Status".
func healthEvents(s tracetest.SpanStub) []string {
	var out []string
	for _, ev := range s.Events {
		if ev.Name != "verify.object" {
			continue
		}
		a := attribute.NewSet(ev.Attributes...)
		k, _ := a.Value("object.kind")
		n, _ := a.Value("object.name")
		h, _ := a.Value("health.status")
		out = append(out, k.AsString()+"/"+n.AsString()+" "+h.AsString())
	}
	return out
}

// TestVerifySucceedsWhenTheDeploymentIsAvailable: the provisioner (as its Platform identity) applies a Deployment
// and a ConfigMap and succeeds once kube-controller-manager and kwok made the Deployment Available; the span
// records each object's health as it changed.
func TestVerifySucceedsWhenTheDeploymentIsAvailable(t *testing.T) {
	RegisterTestingT(t)
	healthy := verifies("healthy")
	// minReadySeconds keeps the Deployment unavailable for 2s after its pod is ready, so the verify has to wait.
	_, span, err := provision(t, time.Minute, 0, deployment("web", "  minReadySeconds: 2", ""),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {k: v}\n")
	Expect(err).NotTo(HaveOccurred())
	Expect(span.Status.Code).NotTo(Equal(codes.Error), span.Status.Description)
	ev := healthEvents(span)
	Expect(ev).To(ContainElements("ConfigMap/cfg Current", "Deployment/web InProgress", "Deployment/web Current"))
	Expect(ev[len(ev)-1]).To(Equal("Deployment/web Current"))
	Expect(verifies("healthy")).To(Equal(healthy+1), "counted for the tenant's dashboard")
}

// TestVerifyFailsNamingTheObject: a Deployment whose pods cannot be scheduled fails the provisioner (span ERROR,
// so pharos replays the event like any stage failure) naming the Deployment and its status message: Failed once
// its progress deadline passed, or InProgress when the verify deadline came first.
func TestVerifyFailsNamingTheObject(t *testing.T) {
	unschedulable := "      nodeSelector: {katastroma.test/none: \"true\"}"
	t.Run("progress deadline exceeded", func(t *testing.T) {
		RegisterTestingT(t)
		failed := verifies("failed")
		ns, span, err := provision(t, time.Minute, 0, deployment("stuck", "  progressDeadlineSeconds: 2", unschedulable))
		Expect(err).To(MatchError(And(ContainSubstring("verify: 1 of 1 objects failed"),
			ContainSubstring("Deployment "+ns+"/stuck Failed: Progress deadline exceeded"),
			ContainSubstring("has timed out progressing"))))
		Expect(span.Status.Code).To(Equal(codes.Error))
		Expect(healthEvents(span)).To(ContainElement("Deployment/stuck Failed"))
		Expect(verifies("failed")).To(Equal(failed + 1))
	})
	t.Run("verify deadline", func(t *testing.T) {
		RegisterTestingT(t)
		timedOut := verifies("timed-out")
		ns, span, err := provision(t, 3*time.Second, 0, deployment("slow", "", unschedulable))
		Expect(err).To(MatchError(And(ContainSubstring("verify: 1 of 1 objects not healthy after 3s"),
			ContainSubstring("Deployment "+ns+"/slow InProgress: "))))
		Expect(span.Status.Code).To(Equal(codes.Error))
		Expect(verifies("timed-out")).To(Equal(timedOut + 1))
	})
	// A source target's data.verify-timeout (sent as metadata) overrides the stage's --verify-timeout, both ways:
	// a slow rollout gets longer, a quick one less.
	t.Run("the target's verify timeout", func(t *testing.T) {
		RegisterTestingT(t)
		ns, _, err := provisionWith(t, time.Minute, 0, map[string]string{pipeline.MDVerifyTimeout: "2s"},
			deployment("target", "", unschedulable))
		Expect(err).To(MatchError(And(ContainSubstring("verify: 1 of 1 objects not healthy after 2s"),
			ContainSubstring("Deployment "+ns+"/target InProgress: "))))
	})
	// The verify runs inside the call, whose deadline fetching, rendering and applying already used part of: when
	// that deadline comes before the verify timeout, the verify still times out naming the unhealthy object (and
	// answers before the caller gives up), instead of failing to read the objects once the call is cancelled.
	t.Run("call deadline before the verify timeout", func(t *testing.T) {
		RegisterTestingT(t)
		timedOut, aborted := verifies("timed-out"), verifies("aborted")
		ns, span, err := provision(t, time.Minute, 6*time.Second, deployment("late", "", unschedulable))
		Expect(err).To(MatchError(And(ContainSubstring("verify: 1 of 1 objects not healthy after"),
			ContainSubstring("before the call's deadline"), ContainSubstring("Deployment "+ns+"/late InProgress: "))))
		Expect(span.Status.Code).To(Equal(codes.Error))
		Expect(verifies("timed-out")).To(Equal(timedOut + 1))
		Expect(verifies("aborted")).To(Equal(aborted))
	})
}
