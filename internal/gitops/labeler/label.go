// Package labeler marks every object with its tenant and source-target identity, and serves that as the
// LabelerService stage.
package labeler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// LabelValue returns s when it is a valid label value, otherwise "h" followed by 40 hex digits of its SHA-256
// (URLs, refs with slashes and long paths are not valid label values). The original goes into an annotation.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(sum[:20])
}

// Label adds the tenant and source-target labels, the original repo/ref/path annotations, a hash of the desired
// content and the commit annotation. The hash covers everything but the commit, so a push that changes nothing
// for an object keeps its hash and the provisioner can leave the object alone.
func Label(u *unstructured.Unstructured, pc pipeline.Context) error {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[pipeline.LabelTenant] = LabelValue(pc.Tenant)
	labels[pipeline.LabelSourceTarget] = LabelValue(pc.Namespace + "." + pc.SourceTarget)
	labels[pipeline.LabelRepo] = LabelValue(pipeline.RedactURL(pc.RepoURL))
	labels[pipeline.LabelRef] = LabelValue(pc.Ref)
	labels[pipeline.LabelPath] = LabelValue(pc.Path)
	u.SetLabels(labels)
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[pipeline.AnnotationRepo] = pipeline.RedactURL(pc.RepoURL) // every reader of the object sees it
	ann[pipeline.AnnotationRef] = pc.Ref
	ann[pipeline.AnnotationPath] = pc.Path
	delete(ann, pipeline.AnnotationCommit)
	delete(ann, pipeline.AnnotationHash)
	u.SetAnnotations(ann)
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	ann[pipeline.AnnotationHash] = hex.EncodeToString(sum[:])
	ann[pipeline.AnnotationCommit] = pc.Commit
	u.SetAnnotations(ann)
	return nil
}
