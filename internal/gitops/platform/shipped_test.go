package platform

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// TestShippedRolesFileMatchesTheCode: config/rbac ships, under config/default's namePrefix, exactly the
// ClusterRoles the Platform controller binds, with the rules the stages are written against.
func TestShippedRolesFileMatchesTheCode(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../../../config/default/kustomization.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var kustomization struct {
		NamePrefix string `json:"namePrefix"`
	}
	g.Expect(yaml.Unmarshal(data, &kustomization)).To(Succeed())
	g.Expect(kustomization.NamePrefix).To(Equal(ShippedNamePrefix), "the roles are bound by their prefixed names")

	data, err = os.ReadFile("../../../config/rbac/katastroma_stage_roles.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	inFile := map[string]*rbacv1.ClusterRole{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		cr := &rbacv1.ClusterRole{}
		if err := decoder.Decode(cr); errors.Is(err, io.EOF) {
			break
		} else {
			g.Expect(err).NotTo(HaveOccurred())
		}
		if cr.Kind == "" && cr.Name == "" {
			continue // the comment before the first document
		}
		g.Expect(cr.Kind).To(Equal("ClusterRole"), cr.Name)
		inFile[ShippedNamePrefix+cr.Name] = cr
	}
	want := ShippedClusterRoles()
	g.Expect(inFile).To(HaveLen(len(want)))
	for _, cr := range want {
		g.Expect(inFile).To(HaveKey(cr.Name))
		g.Expect(inFile[cr.Name].Rules).To(Equal(cr.Rules), "rules of %s: update the YAML and the code together", cr.Name)
		g.Expect(inFile[cr.Name].AggregationRule).To(Equal(cr.AggregationRule), "aggregation of %s", cr.Name)
		for k, v := range cr.Labels {
			g.Expect(inFile[cr.Name].Labels).To(HaveKeyWithValue(k, v), "labels of %s", cr.Name)
		}
	}
}

func TestStageClusterRoles(t *testing.T) {
	for stage, want := range map[string]string{"source": SourceClusterRole, "provisioner": ProvisionerClusterRole,
		"pruner": PrunerClusterRole, "renderer": CallerCheckClusterRole, "orderer": CallerCheckClusterRole,
		"labeler": CallerCheckClusterRole, "pharos": CallerCheckClusterRole} {
		g := NewWithT(t)
		g.Expect(StageClusterRole(stage)).To(Equal(want), stage)
		if want != "" {
			g.Expect(ShippedRules(want)).NotTo(BeEmpty(), stage)
		}
	}
}
