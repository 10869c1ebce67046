package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TracedReconciler wraps a reconciler so that every reconcile runs in a span named "reconcile" carrying the
// controller name and the object key, and logs with the span's trace_id and span_id.
func TracedReconciler(controller string, r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		ctx, span := StartSpan(ctx, "controllers", "reconcile",
			attribute.String("k8s.controller", controller),
			attribute.String("k8s.namespace", req.Namespace),
			attribute.String("k8s.name", req.Name))
		res, err := r.Reconcile(ctx, req)
		EndSpan(span, err)
		return res, err
	})
}
