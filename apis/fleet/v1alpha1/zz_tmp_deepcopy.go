package v1alpha1

// Temporary hand-written deep copies until controller-gen is available; delete when `make generate` runs.

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func (in *PolicySelector) DeepCopyInto(out *PolicySelector) {
	*out = *in
	out.Matchers = append([]string(nil), in.Matchers...)
	out.CollectorIDs = append([]string(nil), in.CollectorIDs...)
}

func (in *ExternalAttributeSync) DeepCopyInto(out *ExternalAttributeSync) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := in.Spec
	if s.Source.HTTP != nil {
		h := *s.Source.HTTP
		s.Source.HTTP = &h
	}
	if s.Source.SQL != nil {
		q := *s.Source.SQL
		s.Source.SQL = &q
	}
	if s.Source.SecretRef != nil {
		r := *s.Source.SecretRef
		s.Source.SecretRef = &r
	}
	in.Spec.Selector.DeepCopyInto(&s.Selector)
	s.Mapping.AttributeFields = maps.Clone(s.Mapping.AttributeFields)
	s.Mapping.RequiredKeys = append([]string(nil), s.Mapping.RequiredKeys...)
	out.Spec = s
	st := in.Status
	if st.LastSyncTime != nil {
		st.LastSyncTime = st.LastSyncTime.DeepCopy()
	}
	if st.LastSuccessTime != nil {
		st.LastSuccessTime = st.LastSuccessTime.DeepCopy()
	}
	if in.Status.OwnedKeys != nil {
		st.OwnedKeys = make([]OwnedAttributes, len(in.Status.OwnedKeys))
		for i, o := range in.Status.OwnedKeys {
			st.OwnedKeys[i] = OwnedAttributes{CollectorID: o.CollectorID, Attributes: maps.Clone(o.Attributes)}
		}
	}
	if in.Status.Conditions != nil {
		st.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&st.Conditions[i])
		}
	}
	out.Status = st
}

func (in *ExternalAttributeSync) DeepCopy() *ExternalAttributeSync {
	if in == nil {
		return nil
	}
	out := new(ExternalAttributeSync)
	in.DeepCopyInto(out)
	return out
}

func (in *ExternalAttributeSync) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *ExternalAttributeSyncList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(ExternalAttributeSyncList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]ExternalAttributeSync, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *RemoteAttributePolicy) DeepCopyInto(out *RemoteAttributePolicy) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.Selector.DeepCopyInto(&out.Spec.Selector)
	out.Spec.Attributes = maps.Clone(in.Spec.Attributes)
	out.Status.MatchedCollectorIDs = append([]string(nil), in.Status.MatchedCollectorIDs...)
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

func (in *RemoteAttributePolicy) DeepCopy() *RemoteAttributePolicy {
	if in == nil {
		return nil
	}
	out := new(RemoteAttributePolicy)
	in.DeepCopyInto(out)
	return out
}

func (in *RemoteAttributePolicy) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *RemoteAttributePolicyList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(RemoteAttributePolicyList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]RemoteAttributePolicy, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
