package gnmic

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CertificateTimedOut is measured from when the wait for the current issuance began, not from the Certificate's
// creation: a re-issue long after creation (new DNS names, the Secret deleted) starts a new wait. (Before, any
// re-issue of a Certificate older than the wait reported CertificateTimedOut at once and was polled every minute.)
func TestCertificateWaitStart(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	specChanged := created.Add(48 * time.Hour)
	notReady := created.Add(72 * time.Hour)
	issuing := created.Add(96 * time.Hour)
	cond := func(typ, status string, at time.Time) any {
		return map[string]any{"type": typ, "status": status, "lastTransitionTime": at.Format(time.RFC3339)}
	}
	for name, tc := range map[string]struct {
		annotation string
		conds      []any
		want       time.Time
	}{
		"new, no status yet":                      {want: created},
		"ready since creation":                    {conds: []any{cond("Ready", "True", notReady)}, want: created},
		"the operator changed the spec":           {annotation: specChanged.Format(time.RFC3339), conds: []any{cond("Ready", "True", notReady)}, want: specChanged},
		"not ready since (Secret deleted)":        {conds: []any{cond("Ready", "False", notReady)}, want: notReady},
		"issuing since":                           {conds: []any{cond("Ready", "False", notReady), cond("Issuing", "True", issuing)}, want: issuing},
		"a failed issuance keeps the Ready start": {conds: []any{cond("Ready", "False", notReady), cond("Issuing", "False", issuing)}, want: notReady},
		"spec change after the last transition": {annotation: issuing.Add(time.Hour).Format(time.RFC3339),
			conds: []any{cond("Ready", "False", notReady), cond("Issuing", "True", issuing)}, want: issuing.Add(time.Hour)},
		"a damaged annotation falls back": {annotation: "yesterday", conds: []any{cond("Ready", "False", notReady)}, want: notReady},
	} {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{}}
			u.SetCreationTimestamp(metav1.NewTime(created))
			if tc.annotation != "" {
				u.SetAnnotations(map[string]string{annotationIssuanceRequested: tc.annotation})
			}
			if tc.conds != nil {
				u.Object["status"] = map[string]any{"conditions": tc.conds}
			}
			NewWithT(t).Expect(certificateWaitStart(u)).To(BeTemporally("==", tc.want))
		})
	}
}
