package gnmic

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// stallError is a failure that retrying cannot fix until the spec or a referenced object changes.
type stallError struct {
	reason  string
	message string
}

func (e *stallError) Error() string { return e.message }

func stall(reason, format string, args ...any) error {
	return &stallError{reason: reason, message: fmt.Sprintf(format, args...)}
}

// fetched is what one run read from its source.
type fetched struct {
	devices         []targetsource.Device
	failures        []targetsource.Failure
	truncated       bool
	truncatedReason string
}

// fetch reads the source and maps it to devices.
func (r *TargetSourceReconciler) fetch(ctx context.Context, ts *gnmicv1alpha1.TargetSource) (fetched, error) {
	src := ts.Spec.Source
	switch {
	case src.Type == gnmicv1alpha1.SourceTypeStatic && src.Static != nil:
		var out fetched
		for _, d := range src.Static.Devices {
			out.devices = append(out.devices, targetsource.Device{
				Name: d.Name, Address: d.Address, Port: int(d.Port), Profile: d.Profile, Labels: d.Labels,
			})
		}
		return out, nil
	case src.Type == gnmicv1alpha1.SourceTypeConfigMap && src.ConfigMap != nil:
		cm := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: src.ConfigMap.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return fetched{}, stall(gnmicv1alpha1.ReasonConfigMapNotFound, "ConfigMap %q not found", src.ConfigMap.Name)
			}
			return fetched{}, err
		}
		data := map[string][]byte{}
		for k, v := range cm.BinaryData {
			data[k] = v
		}
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		return r.mapObject(data, src.ConfigMap, gnmicv1alpha1.ReasonConfigMapNotFound, "ConfigMap")
	case src.Type == gnmicv1alpha1.SourceTypeSecret && src.Secret != nil:
		secret, err := r.secret(ctx, ts.Namespace, src.Secret.Name)
		if err != nil {
			return fetched{}, err
		}
		return r.mapObject(secret.Data, src.Secret, gnmicv1alpha1.ReasonSecretNotFound, "Secret")
	case src.Type == gnmicv1alpha1.SourceTypeHTTP && src.HTTP != nil:
		return r.fetchHTTP(ctx, ts.Namespace, src.HTTP)
	}
	return fetched{}, stall(gnmicv1alpha1.ReasonInvalidSpec, "source type %q has no matching settings", src.Type)
}

func (r *TargetSourceReconciler) secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, stall(gnmicv1alpha1.ReasonSecretNotFound, "Secret %q not found", name)
		}
		return nil, err
	}
	return secret, nil
}

func (r *TargetSourceReconciler) secretKey(ctx context.Context, namespace string, ref gnmicv1alpha1.SecretKeyRef) (string, error) {
	secret, err := r.secret(ctx, namespace, ref.Name)
	if err != nil {
		return "", err
	}
	v, ok := secret.Data[ref.Key]
	if !ok {
		return "", stall(gnmicv1alpha1.ReasonSecretNotFound, "Secret %q has no key %q", ref.Name, ref.Key)
	}
	return string(v), nil
}

// mapObject parses one key, or every key in sorted order, and concatenates the devices.
func (r *TargetSourceReconciler) mapObject(data map[string][]byte, src *gnmicv1alpha1.ObjectSource, notFound, kind string) (fetched, error) {
	keys := []string{src.Key}
	if src.Key == "" {
		keys = keys[:0]
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
	} else if _, ok := data[src.Key]; !ok {
		return fetched{}, stall(notFound, "%s %q has no key %q", kind, src.Name, src.Key)
	}
	var out fetched
	for _, k := range keys {
		doc, err := targetsource.ParseDocument(data[k])
		if err != nil {
			return fetched{}, fmt.Errorf("%s %q key %q: %w", kind, src.Name, k, err)
		}
		if err := r.mapDocument(&out, doc, src.Mapping); err != nil {
			return fetched{}, fmt.Errorf("%s %q key %q: %w", kind, src.Name, k, err)
		}
	}
	return out, nil
}

func (r *TargetSourceReconciler) mapDocument(out *fetched, doc any, mapping *gnmicv1alpha1.Mapping) error {
	if errs := r.Mapper.CheckMapping(mapping); len(errs) > 0 {
		for field, err := range errs {
			return stall(gnmicv1alpha1.ReasonInvalidSpec, "mapping.%s: %v", field, err)
		}
	}
	res, err := r.Mapper.Map(doc, mapping)
	if err != nil {
		return err
	}
	out.devices = append(out.devices, res.Devices...)
	out.failures = append(out.failures, res.Failures...)
	return nil
}

func (r *TargetSourceReconciler) fetchHTTP(ctx context.Context, namespace string, src *gnmicv1alpha1.HTTPSource) (fetched, error) {
	req := targetsource.HTTPRequest{URL: src.URL, Method: src.Method, Body: src.Body, Headers: src.Headers}
	if p := src.Pagination; p != nil {
		req.NextField, req.RequestParam, req.MaxPages = p.NextField, p.RequestParam, int(p.MaxPages)
		if req.MaxPages == 0 {
			req.MaxPages = 100
		}
	}
	var err error
	if a := src.Auth; a != nil {
		switch {
		case a.Basic != nil:
			secret, err := r.secret(ctx, namespace, a.Basic.SecretRef.Name)
			if err != nil {
				return fetched{}, err
			}
			uk, pk := orDefault(a.Basic.UsernameKey, "username"), orDefault(a.Basic.PasswordKey, "password")
			user, okU := secret.Data[uk]
			pass, okP := secret.Data[pk]
			if !okU || !okP {
				return fetched{}, stall(gnmicv1alpha1.ReasonSecretNotFound, "Secret %q needs keys %q and %q", a.Basic.SecretRef.Name, uk, pk)
			}
			req.Creds = targetsource.HTTPCredentials{Basic: true, BasicUser: string(user), BasicPassword: string(pass)}
		case a.Token != nil:
			req.Creds.TokenScheme = orDefault(a.Token.Scheme, "Bearer")
			if req.Creds.Token, err = r.secretKey(ctx, namespace, a.Token.SecretRef); err != nil {
				return fetched{}, err
			}
		case a.Header != nil:
			req.Creds.HeaderName = a.Header.Name
			if req.Creds.HeaderValue, err = r.secretKey(ctx, namespace, a.Header.SecretRef); err != nil {
				return fetched{}, err
			}
		}
	}
	var caPEM, certPEM, keyPEM []byte
	insecure := false
	if t := src.TLS; t != nil {
		insecure = t.InsecureSkipVerify
		if t.CABundleRef != nil {
			cm := &corev1.ConfigMap{}
			if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: t.CABundleRef.Name}, cm); err != nil {
				if apierrors.IsNotFound(err) {
					return fetched{}, stall(gnmicv1alpha1.ReasonConfigMapNotFound, "ConfigMap %q not found", t.CABundleRef.Name)
				}
				return fetched{}, err
			}
			ca, ok := cm.Data[t.CABundleRef.Key]
			if !ok {
				return fetched{}, stall(gnmicv1alpha1.ReasonConfigMapNotFound, "ConfigMap %q has no key %q", t.CABundleRef.Name, t.CABundleRef.Key)
			}
			caPEM = []byte(ca)
		}
		if t.ClientCertRef != nil {
			secret, err := r.secret(ctx, namespace, t.ClientCertRef.Name)
			if err != nil {
				return fetched{}, err
			}
			certPEM, keyPEM = secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]
		}
	}
	tlsCfg, err := targetsource.TLSConfig(insecure, caPEM, certPEM, keyPEM)
	if err != nil {
		return fetched{}, stall(gnmicv1alpha1.ReasonInvalidSpec, "tls: %v", err)
	}
	guard := r.Guard
	if guard == nil {
		guard = netguard.New()
	}
	// Every connection, redirect and next page goes through the SSRF guard; no proxy, so the dial check sees the
	// inventory's own address. The run's context bounds the whole fetch.
	httpClient := guard.Client(0, tlsCfg)
	defer httpClient.CloseIdleConnections()
	res, err := targetsource.FetchHTTP(ctx, httpClient, req)
	if err != nil {
		return fetched{}, err
	}
	out := fetched{truncated: res.Truncated, truncatedReason: res.TruncatedReason}
	for _, page := range res.Pages {
		if err := r.mapDocument(&out, page, src.Mapping); err != nil {
			return fetched{}, err
		}
	}
	return out, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
