package gnmic

import (
	"context"
	"encoding/json"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// TargetWriter sends the server-side applies of Targets and does not decode what the API server answers.
//
// The answer to an apply is the whole Target with its managedFields. controller-runtime's client decodes it into
// the object passed in, which a TargetSource run never reads: the run judges its writes by the status code alone,
// and the informer brings the written object into the cache anyway. For a 10,000-Target first sync that decoding
// was the largest single cost of the manager's CPU, taken from the two cores the API server also needs. Errors
// still come back as API status errors (apierrors.IsConflict etc. work), since client-go decodes the body of a
// failed request into one.
type TargetWriter struct {
	rest rest.Interface
}

// NewTargetWriter builds a writer on cfg (its QPS/burst give the writer a rate limiter of its own, as
// controller-runtime gives each resource's client) sharing hc's connections (nil: a client of its own); scheme
// decodes error statuses.
func NewTargetWriter(cfg *rest.Config, hc *http.Client, scheme *runtime.Scheme) (*TargetWriter, error) {
	c := rest.CopyConfig(cfg)
	gv := gnmicv1alpha1.GroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(c); err != nil {
			return nil, err
		}
	}
	rc, err := rest.RESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	return &TargetWriter{rest: rc}, nil
}

// Apply server-side applies u (an apply configuration of a Target: only the fields the manager owns) with force,
// and returns only the outcome.
func (w *TargetWriter) Apply(ctx context.Context, u *unstructured.Unstructured, fieldManager string) error {
	body, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return w.rest.Patch(types.ApplyPatchType).
		Namespace(u.GetNamespace()).Resource("targets").Name(u.GetName()).
		Param("fieldManager", fieldManager).Param("force", "true").
		Body(body).Do(ctx).Error()
}
