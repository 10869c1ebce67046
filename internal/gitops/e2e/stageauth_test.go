package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// TestAuthenticatedStagesUnderPlatformIdentities: every stage runs as the Platform runs it — its own
// ServiceAccount's API token (only the shipped roles, the renderer, orderer and labeler bound to caller-check),
// --stage-callers and its own stage-audience token — and a push to a claimed tenant namespace deploys: the shipped
// roles suffice for every review and namespace check. Before the Tenant has set the namespace up, the push is
// refused as not served.
func TestAuthenticatedStagesUnderPlatformIdentities(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	ns := "tenant-" + rand.String(6)
	tenantName := "team-" + ns[7:]
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{pipeline.LabelTenant: tenantName}}})).To(Succeed())
	Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
		Name: source.WebhookSecretName}, Data: map[string][]byte{source.WebhookSecretKey: []byte(webhookSecret)}})).
		To(Succeed())
	holdTenant(ctx, ns)

	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: "platform-" + rand.String(6), Name: "p"}}
	cfgs := grantAsPlatform(ctx, p, ns, tenancy.DefaultResources())
	dir := t.TempDir()
	tokens := map[string]string{}
	for _, st := range runner.Stages {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: platform.Name(st)}}
		if cfgs[st] == nil { // renderer, orderer, labeler: the caller-check role only
			Expect(env.Client.Create(ctx, sa)).To(Succeed())
			Expect(testenv.BindStage(ctx, env.Client, p, st)).To(Succeed())
			tr := &authenticationv1.TokenRequest{}
			Expect(env.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
			cfg := rest.AnonymousClientConfig(env.Config)
			cfg.BearerToken = tr.Status.Token
			cfgs[st] = cfg
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{stage.Audience}}}
		Expect(env.Client.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		tokens[st] = filepath.Join(dir, st)
		Expect(os.WriteFile(tokens[st], []byte(tr.Status.Token), 0o600)).To(Succeed())
	}

	sctx, cancel := context.WithCancel(context.Background())
	lis := map[string]net.Listener{}
	for _, name := range runner.Stages {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		lis[name] = l
	}
	pl := &runner.Pipeline{Stages: map[string]*runner.Running{}}
	t.Cleanup(func() {
		cancel()
		_ = pl.Wait()
	})
	for i, name := range runner.Stages {
		reviews, err := client.New(cfgs[name], client.Options{Scheme: operator.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		callers := []string{p.Namespace}
		o := runner.Options{Listener: lis[name], OrdererAddr: lis[runner.Orderer].Addr().String(),
			Config: cfgs[name], Scheme: operator.NewScheme(), VerifyTimeout: -1,
			Connection: stage.Connection{TokenFile: tokens[name], Auth: &stage.Authenticator{
				Review: stage.KubeReview(reviews), Namespaces: callers, Served: stage.KubeServed(reviews, callers)}}}
		if name == runner.Source {
			o.HTTPAddr = "127.0.0.1:0"
			// The test git daemon listens on loopback, which the fetch guard refuses unless allowed.
			o.RepositoryAllowForTesting = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		}
		if i+1 < len(runner.Stages) {
			o.Next = lis[runner.Stages[i+1]].Addr().String()
		}
		r, err := runner.Start(sctx, name, o)
		Expect(err).NotTo(HaveOccurred(), name)
		pl.Stages[name] = r
	}

	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "app", "")
	push := func(value string) (string, tracetest.SpanStub) {
		sha, changed := r.commit(map[string]*string{"app/cm.yaml": configMapYAML("cfg", "", value)})
		code, resp := deliver(pl.WebhookURL(), ns, r.pushPayload(sha, changed), webhookSecret, "push")
		Expect(code).To(Equal(202), "%v", resp)
		return sha, waitEvent(t, fmt.Sprint(resp["event_id"]))
	}
	// The Tenant lists the namespace in its spec but has not set it up: the renderer refuses the work.
	_, root := push("0")
	Expect(root.Status.Code).To(Equal(codes.Error))
	Expect(root.Status.Description).To(ContainSubstring("is not served by this Platform"))

	tnt := &gitopsv1alpha1.Tenant{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Name: tenantName}, tnt)).To(Succeed())
	tnt.Status.Namespaces = []string{ns} // as the Tenant controller does once the namespace is set up
	Expect(env.Client.Status().Update(ctx, tnt)).To(Succeed())
	sha, root := push("1")
	Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
	Expect(mustCM(ctx, ns, "cfg").Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha))
}
