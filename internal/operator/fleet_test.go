package operator

import (
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/time/rate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// bareManager is enough of a manager for the client providers, which use it only as a key and for its reader.
type bareManager struct{ ctrl.Manager }

func (bareManager) GetAPIReader() client.Reader { return nil }

func TestAdmissionHasAFleetBudgetOfItsOwn(t *testing.T) {
	g := NewWithT(t)
	mgr := &bareManager{}
	s := FleetSettings{CredentialsSecret: "fleet-system/fleet-credentials", RPS: 3, Burst: 50}
	controllers, err := fleetProvider(mgr, s)
	g.Expect(err).NotTo(HaveOccurred())
	admission, err := admissionProvider(mgr, s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(admission.Limiter()).NotTo(BeIdenticalTo(controllers.Limiter()),
		"a reconcile storm that empties the controllers' bucket must not hold a webhook past its timeout")
	g.Expect(admission.Limiter().Limit()).To(Equal(rate.Limit(AdmissionRPS)))
	g.Expect(controllers.Limiter().Limit()).To(Equal(rate.Limit(3)))
	// Each is built once per manager and shared.
	again, _ := admissionProvider(mgr, s)
	g.Expect(again).To(BeIdenticalTo(admission))
}
