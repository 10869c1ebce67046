package testenv

import (
	"context"
	"fmt"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// ShippedRolesFile holds the gitops stages' ClusterRoles that an install ships and every Platform binds.
const ShippedRolesFile = "config/rbac/katastroma_stage_roles.yaml"

// ShippedClusterRoles reads ShippedRolesFile and names each role as an install does, with config/default's
// namePrefix (the control plane of a test does not install config/rbac).
func ShippedClusterRoles() ([]*rbacv1.ClusterRole, error) {
	objs, err := ReadObjects(filepath.Join(RepoRoot(), ShippedRolesFile))
	if err != nil {
		return nil, err
	}
	out := make([]*rbacv1.ClusterRole, 0, len(objs))
	for _, u := range objs {
		cr := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cr); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", ShippedRolesFile, u.GetName(), err)
		}
		cr.Name = platform.ShippedNamePrefix + cr.Name
		out = append(out, cr)
	}
	return out, nil
}

// ApplyShippedClusterRoles creates the shipped ClusterRoles, as an install would; existing ones are kept, so
// every test of a package may call it.
func ApplyShippedClusterRoles(ctx context.Context, c client.Client) error {
	roles, err := ShippedClusterRoles()
	if err != nil {
		return err
	}
	for _, cr := range roles {
		if err := c.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRole %s: %w", cr.Name, err)
		}
	}
	return nil
}

// BindStage binds p's ServiceAccount of stage to the stage's shipped ClusterRole, as the Platform controller's
// shared binding does, under a name of p's own so tests sharing a control plane do not meet; none for a stage
// without one.
func BindStage(ctx context.Context, c client.Client, p *gitopsv1alpha1.Platform, stage string) error {
	role := platform.StageClusterRole(stage)
	if role == "" {
		return nil
	}
	return c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace + "-" + p.Name + "-" + stage},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{platform.StageSubject(p, stage)}})
}

// OperatorRoleFiles are the operator's generated RBAC: what every group needs (config/rbac/role.yaml) and each
// group's (config/rbac/<group>/role.yaml), as `make manifests` writes them from the markers.
var OperatorRoleFiles = []string{"config/rbac/role.yaml", "config/rbac/fleet/role.yaml", "config/rbac/gnmic/role.yaml",
	"config/rbac/agentrax/role.yaml", "config/rbac/gitops/role.yaml"}

// OperatorRoles reads the ClusterRoles and Roles of files (paths under the repository root; OperatorRoleFiles
// when none are given).
func OperatorRoles(files ...string) ([]client.Object, error) {
	if len(files) == 0 {
		files = OperatorRoleFiles
	}
	var out []client.Object
	for _, f := range files {
		objs, err := ReadObjects(filepath.Join(RepoRoot(), f))
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			var obj client.Object
			switch u.GetKind() {
			case "ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "Role":
				obj = &rbacv1.Role{}
			default:
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f, u.GetName(), err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}
