package kube

import (
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// ControllerOptions are the per-controller settings the manager's flags control.
type ControllerOptions struct {
	// MaxConcurrentReconciles is how many objects the controller reconciles at once; 0 keeps the default of 1.
	MaxConcurrentReconciles int
}

// Options converts to controller-runtime's controller options.
func (o ControllerOptions) Options() controller.Options {
	return controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}
}
