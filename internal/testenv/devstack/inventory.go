package devstack

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// inventory is the device list the sample TargetSource (config/samples/gnmic_v1alpha1_targetsource.yaml) reads. It
// lives here rather than in config/samples because operator-sdk turns every sample into the CSV's alm-examples, which
// must only hold the operator's own kinds.
const inventory = `# Edit me: the lab-inventory TargetSource picks changes up at once.
- {hostname: leaf1, mgmt_ip: 192.0.2.11, site: ams}
- {hostname: leaf2, mgmt_ip: 192.0.2.12, site: ams}
- {hostname: spine1, mgmt_ip: 192.0.2.1, site: ams}
`

// ApplyInventory creates (or resets) the ConfigMap default/device-inventory the sample TargetSource reads.
func ApplyInventory(ctx context.Context, c client.Client, owner string) error {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "device-inventory"},
		Data:       map[string]string{"devices.yaml": inventory},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership)
}
