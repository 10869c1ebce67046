package provisioner

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func apiutilMapper(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	return apiutil.NewDynamicRESTMapper(cfg, hc)
}
