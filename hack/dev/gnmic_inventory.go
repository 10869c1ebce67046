package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// devInventory is the device list the sample TargetSource (config/samples/gnmic_v1alpha1_targetsource.yaml)
// reads. It lives here rather than in config/samples because operator-sdk turns every sample into the CSV's
// alm-examples, which must only hold the operator's own kinds.
const devInventory = `# Edit me: the lab-inventory TargetSource picks changes up at once.
- {hostname: leaf1, mgmt_ip: 192.0.2.11, site: ams}
- {hostname: leaf2, mgmt_ip: 192.0.2.12, site: ams}
- {hostname: spine1, mgmt_ip: 192.0.2.1, site: ams}
`

// applyDevInventory creates (or resets) the ConfigMap the sample TargetSource reads.
func applyDevInventory(ctx context.Context, c client.Client) error {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "device-inventory"},
		Data:       map[string]string{"devices.yaml": devInventory},
	}
	u, err := toUnstructured(cm)
	if err != nil {
		return err
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("make-dev"), client.ForceOwnership)
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
