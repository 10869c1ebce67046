package requester_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/quartet-dev/quartet-operator/internal/requester"
)

// reviewer answers SubjectAccessReviews from a table of what alice may do and records each review's spec.
func reviewer(seen *[]authorizationv1.SubjectAccessReviewSpec, fail error) client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if fail != nil {
				return fail
			}
			sar := obj.(*authorizationv1.SubjectAccessReview)
			*seen = append(*seen, sar.Spec)
			a := sar.Spec.ResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "alice" && a.Resource == "secrets" && a.Namespace == "team-a" && a.Name == "mine"
			return nil
		},
	}).Build()
}

func asUser(name string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo: authenticationv1.UserInfo{Username: name, UID: "u1", Groups: []string{"team-a"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}},
	}})
}

func TestCheck(t *testing.T) {
	path := field.NewPath("spec", "auth", "secretRef", "name")
	for _, tc := range []struct {
		name    string
		user    string
		use     requester.Use
		refused bool
	}{
		{"a Secret the user may read", "alice", requester.SecretGet(path, "team-a", "mine"), false},
		{"a Secret the user may not read", "alice", requester.SecretGet(path, "team-a", "prod-db"), true},
		{"another user", "mallory", requester.SecretGet(path, "team-a", "mine"), true},
		{"an empty reference names nothing", "mallory", requester.SecretGet(path, "team-a", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var seen []authorizationv1.SubjectAccessReviewSpec
			c := &requester.Checker{Reviews: reviewer(&seen, nil)}
			errs, err := c.Check(asUser(tc.user), tc.use)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.refused {
				g.Expect(errs).To(HaveLen(1))
				g.Expect(errs[0].Field).To(Equal("spec.auth.secretRef.name"))
				g.Expect(errs[0].Detail).To(ContainSubstring(tc.user))
				g.Expect(errs[0].Detail).To(ContainSubstring("team-a/" + tc.use.Name))
			} else {
				g.Expect(errs).To(BeEmpty())
			}
			for _, s := range seen {
				g.Expect(s.User).To(Equal(tc.user))
				g.Expect(s.UID).To(Equal("u1"))
				g.Expect(s.Groups).To(ConsistOf("team-a"))
				g.Expect(s.Extra).To(HaveKeyWithValue("scopes", authorizationv1.ExtraValue{"x"}))
			}
		})
	}
}

func TestRefuseFailsClosed(t *testing.T) {
	g := NewWithT(t)
	gr := schema.GroupResource{Group: "operator.gnmic.dev", Resource: "targetsources"}
	use := requester.SecretGet(field.NewPath("spec", "auth"), "team-a", "mine")

	c := &requester.Checker{Reviews: reviewer(new([]authorizationv1.SubjectAccessReviewSpec), errors.New("apiserver down"))}
	err := c.Refuse(asUser("alice"), gr, "ts", use)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("could not decide"))

	err = (&requester.Checker{Reviews: reviewer(new([]authorizationv1.SubjectAccessReviewSpec), nil)}).Refuse(context.Background(), gr, "ts", use)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "no admission request: nobody to check, so refused")

	var nilChecker *requester.Checker
	g.Expect(nilChecker.Refuse(asUser("mallory"), gr, "ts", use)).To(Succeed(), "a nil checker is switched off")
}
