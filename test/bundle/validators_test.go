package bundle

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	validator "github.com/operator-framework/api/pkg/validation/interfaces"
)

// TestOperatorFrameworkValidators runs the default bundle validators and the operatorframework suite
// (`operator-sdk bundle validate --select-optional suite=operatorframework`) and fails on any error or warning.
// The suite runs with the optional values operator-sdk passes by default (none) and against the Kubernetes
// version this project builds with, where removed APIs turn from warnings into errors.
func TestOperatorFrameworkValidators(t *testing.T) {
	b := theBundle(t)
	suite := validator.Validators{
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.AlphaDeprecatedAPIsValidator,
		validation.GoodPracticesValidator,
	}
	for name, optional := range map[string]map[string]string{
		"defaults":         {},
		"k8s-version=1.37": {"k8s-version": "1.37.0"},
		"minKubeVersion":   {"k8s-version": b.CSV.Spec.MinKubeVersion},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			objs := b.ObjectsToValidate()
			var results []errors.ManifestResult
			results = append(results, validation.DefaultBundleValidators.Validate(objs...)...)
			results = append(results, suite.Validate(append(objs, optional)...)...)
			var problems []string
			for _, r := range results {
				for _, e := range append(r.Errors, r.Warnings...) {
					problems = append(problems, r.Name+": "+e.Error())
				}
			}
			g.Expect(problems).To(BeEmpty())
		})
	}
}
