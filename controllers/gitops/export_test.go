package gitops

import (
	"context"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// WriteChildren runs one pass of writing a Platform's children, so a test can check what a single pass achieves.
func (r *PlatformReconciler) WriteChildren(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	return r.writeChildren(ctx, p)
}
