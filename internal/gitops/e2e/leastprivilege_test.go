package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// grantAsPlatform writes what an install ships (the stages' ClusterRoles of config/rbac) and what the Platform and
// Tenant controllers write for one Platform and one tenant namespace (the stage ServiceAccounts with their
// ClusterRoleBindings, the source stage's tenant RoleBinding, the tenant identities with the tenant's resources)
// and returns a rest config per stage holding a TokenRequest token of its ServiceAccount.
func grantAsPlatform(ctx context.Context, p *gitopsv1alpha1.Platform, tenantNS string,
	resources []gitopsv1alpha1.TenantResource) map[string]*rest.Config {
	c := env.Client
	Expect(testenv.ApplyShippedClusterRoles(ctx, c)).To(Succeed())
	Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})).To(Succeed())
	cfgs := map[string]*rest.Config{}
	for _, st := range []string{gitopsv1alpha1.StageSource, gitopsv1alpha1.StageProvisioner, gitopsv1alpha1.StagePruner} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: platform.Name(st)}}
		Expect(c.Create(ctx, sa)).To(Succeed())
		Expect(testenv.BindStage(ctx, c, p, st)).To(Succeed())
		tr := &authenticationv1.TokenRequest{}
		Expect(c.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tr.Status.Token
		cfgs[st] = cfg
	}
	Expect(c.Create(ctx, platform.SourceTenantRoleBinding(p, tenantNS))).To(Succeed())
	for sa, verbs := range map[string][]string{gitopsv1alpha1.ProvisionerServiceAccount: tenancy.ProvisionerVerbs,
		gitopsv1alpha1.PrunerServiceAccount: tenancy.PrunerVerbs} {
		Expect(c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: sa}})).
			To(Succeed())
		name := "katastroma-" + sa
		Expect(c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name},
			Rules: tenancy.Rules(resources, verbs)})).To(Succeed())
		Expect(c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: tenantNS}}})).To(Succeed())
	}
	return cfgs
}

// startAs runs every stage as its own process would: source, provisioner and pruner with their own identity.
func startAs(t *testing.T, cfgs map[string]*rest.Config) *runner.Pipeline {
	ctx, cancel := context.WithCancel(context.Background())
	lis := map[string]net.Listener{}
	for _, name := range runner.Stages {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		lis[name] = l
	}
	p := &runner.Pipeline{Stages: map[string]*runner.Running{}}
	t.Cleanup(func() {
		cancel()
		_ = p.Wait()
	})
	for i, name := range runner.Stages {
		// The verify is off: this control plane runs no Deployment controller, so the Deployment below never
		// turns Available. The verify under the Platform identity is tested on the cluster-grade control plane
		// (internal/gitops/e2e/health).
		o := runner.Options{Listener: lis[name], OrdererAddr: lis[runner.Orderer].Addr().String(),
			Config: cfgs[name], Scheme: operator.NewScheme(), VerifyTimeout: -1}
		if name == runner.Source {
			o.HTTPAddr = "127.0.0.1:0"
			o.RepositoryAllowForTesting = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		}
		if i+1 < len(runner.Stages) {
			o.Next = lis[runner.Stages[i+1]].Addr().String()
		}
		r, err := runner.Start(ctx, name, o)
		Expect(err).NotTo(HaveOccurred(), name)
		p.Stages[name] = r
	}
	return p
}

func deploymentYAML(image string) *string {
	return s(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: %s}]
`, image))
}

func widgetYAML(name string, size int) *string {
	return s(fmt.Sprintf("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: %s\nspec:\n  size: %d\n", name, size))
}

// TestStagesUnderPlatformIdentities: with only what a Platform and a Tenant grant (no admin anywhere in the
// stages), a push applies, changes and prunes a Secret, a ConfigMap, a Deployment and a custom resource.
func TestStagesUnderPlatformIdentities(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	// The CRD is the cluster admin's; the tenant deploys resources of it.
	crdObj := mustUnstructured(s(crd))
	if err := env.Client.Create(ctx, crdObj); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	ns := "tenant-" + rand.String(6)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{pipeline.LabelTenant: "team-" + ns[7:]}}})).To(Succeed())
	Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
		Name: source.WebhookSecretName}, Data: map[string][]byte{source.WebhookSecretKey: []byte(webhookSecret)}})).
		To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: "platform-" + rand.String(6), Name: "p"}}
	resources := append(tenancy.DefaultResources(),
		gitopsv1alpha1.TenantResource{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}})
	pl := startAs(t, grantAsPlatform(ctx, p, ns, resources))

	r := gitd.newRepo(t)
	sourceTarget(ctx, ns, "web", r, "app", "")
	push := func(files map[string]*string) string {
		sha, changed := r.commit(files)
		code, resp := deliver(pl.WebhookURL(), ns, r.pushPayload(sha, changed), webhookSecret, "push")
		Expect(code).To(Equal(202), "%v", resp)
		root := waitEvent(t, fmt.Sprint(resp["event_id"]))
		Expect(root.Status.Code).NotTo(Equal(codes.Error), root.Status.Description)
		return sha
	}
	get := func(obj client.Object, name string) error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	}

	sha1 := push(map[string]*string{"app/cm.yaml": configMapYAML("cfg", "", "1"), "app/secret.yaml": secretYAML("creds", "1"),
		"app/deploy.yaml": deploymentYAML("nginx:1"), "app/widget.yaml": widgetYAML("w1", 1),
		"app/widget2.yaml": widgetYAML("w2", 1)})
	sec := &corev1.Secret{}
	Expect(get(sec, "creds")).To(Succeed())
	Expect(sec.Annotations).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha1))
	Expect(mustCM(ctx, ns, "cfg").Data).To(HaveKeyWithValue("value", "1"))
	w, err := getObj(ctx, "example.com/v1", "Widget", ns, "w1")
	Expect(err).NotTo(HaveOccurred())
	Expect(w.GetAnnotations()).To(HaveKeyWithValue(pipeline.AnnotationCommit, sha1))

	push(map[string]*string{"app/cm.yaml": configMapYAML("cfg", "", "2"), "app/secret.yaml": secretYAML("creds", "2"),
		"app/deploy.yaml": deploymentYAML("nginx:2"), "app/widget.yaml": widgetYAML("w1", 2)})
	Expect(mustCM(ctx, ns, "cfg").Data).To(HaveKeyWithValue("value", "2"))
	Expect(get(sec, "creds")).To(Succeed())
	Expect(string(sec.Data["value"])).To(Equal("2"))
	d := &appsv1.Deployment{}
	Expect(get(d, "web")).To(Succeed())
	Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:2"))
	w, err = getObj(ctx, "example.com/v1", "Widget", ns, "w1")
	Expect(err).NotTo(HaveOccurred())
	Expect(w.Object["spec"]).To(HaveKeyWithValue("size", BeEquivalentTo(2)))

	push(map[string]*string{"app/secret.yaml": nil, "app/deploy.yaml": nil, "app/widget.yaml": nil,
		"app/widget2.yaml": nil})
	Expect(apierrors.IsNotFound(get(&corev1.Secret{}, "creds"))).To(BeTrue(), "the Secret is pruned")
	Expect(apierrors.IsNotFound(get(&appsv1.Deployment{}, "web"))).To(BeTrue(), "the Deployment is pruned")
	for _, n := range []string{"w1", "w2"} {
		_, err = getObj(ctx, "example.com/v1", "Widget", ns, n)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "widget %s is pruned", n)
	}
	mustCM(ctx, ns, "cfg")
}
