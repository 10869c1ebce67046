package plan

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/openconfig/gnmic/pkg/api/types"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// Defaults gNMIc would otherwise pick itself, made explicit so the payload says what runs.
const (
	defaultTimeout    = 10 * time.Second
	defaultRetryTimer = 2 * time.Second
)

// profileConfig maps a TargetProfile (and its credentials Secret, when present) onto gNMIc's target config;
// tlsKeys are the target-tls Secret keys of the profile's files (TargetTLSKeys).
func profileConfig(p *gnmicv1alpha1.TargetProfile, creds map[ktypes.NamespacedName]map[string][]byte, tlsKeys map[string]string) types.TargetConfig {
	cfg := types.TargetConfig{Timeout: defaultTimeout, RetryTimer: defaultRetryTimer}
	if p == nil {
		return cfg
	}
	s := p.Spec
	if s.Timeout != nil {
		cfg.Timeout = s.Timeout.Duration
	}
	if s.RetryTimer != nil {
		cfg.RetryTimer = s.RetryTimer.Duration
	}
	if ref := s.CredentialsRef; ref != nil {
		data := creds[ktypes.NamespacedName{Namespace: p.Namespace, Name: ref.Name}]
		cfg.Username = optional(data["username"])
		cfg.Password = optional(data["password"])
		cfg.Token = optional(data["token"])
	}
	if s.TLS == nil {
		cfg.Insecure = ptr(true)
	} else {
		cfg.TLSServerName = s.TLS.ServerName
		cfg.TLSMinVersion = string(s.TLS.MinVersion)
		cfg.TLSMaxVersion = string(s.TLS.MaxVersion)
		if len(s.TLS.CipherSuites) > 0 {
			cfg.CipherSuites = append([]string(nil), s.TLS.CipherSuites...)
		}
		if s.TLS.InsecureSkipVerify {
			cfg.SkipVerify = ptr(true)
		}
		if s.TLS.CABundle != nil {
			cfg.TLSCA = targetTLSPath(p, tlsKeys, TargetTLSCA)
		}
		if s.TLS.ClientCertRef != nil {
			cfg.TLSCert, cfg.TLSKey = targetTLSPath(p, tlsKeys, TargetTLSCert), targetTLSPath(p, tlsKeys, TargetTLSPrivateKey)
		}
	}
	if s.Encoding != "" {
		cfg.Encoding = ptr(strings.ToLower(string(s.Encoding)))
	}
	if len(s.Labels) > 0 {
		cfg.EventTags = map[string]string{}
		for k, v := range s.Labels {
			cfg.EventTags[k] = v
		}
	}
	cfg.Proxy = s.Proxy
	if s.GzipCompression {
		cfg.Gzip = ptr(true)
	}
	if s.TCPKeepAlive != nil {
		cfg.TCPKeepalive = s.TCPKeepAlive.Duration
	}
	if ka := s.GRPCKeepAlive; ka != nil {
		cfg.GRPCKeepalive = &types.ClientKeepalive{Time: dur(ka.Time), Timeout: dur(ka.Timeout), PermitWithoutStream: ka.PermitWithoutStream}
	}
	return cfg
}

// subscriptionConfig maps a Subscription onto gNMIc's subscription config; modes are lower-cased as gNMIc
// writes them (stream / sample).
func subscriptionConfig(name string, sub *gnmicv1alpha1.Subscription) *types.SubscriptionConfig {
	s := sub.Spec
	mode, streamMode := gnmicv1alpha1.SplitMode(s.Mode)
	if mode == "" {
		mode = "STREAM"
	}
	cfg := &types.SubscriptionConfig{
		Name: name, Prefix: s.Prefix, Target: s.Target, Paths: append([]string(nil), s.Paths...),
		Mode: strings.ToLower(mode), StreamMode: strings.ToLower(streamMode),
		Qos: s.QoS, SampleInterval: durPtr(s.SampleInterval), HeartbeatInterval: durPtr(s.HeartbeatInterval),
		SuppressRedundant: s.SuppressRedundant, UpdatesOnly: s.UpdatesOnly, Depth: s.Depth,
	}
	if s.Encoding != nil {
		cfg.Encoding = ptr(strings.ToLower(string(*s.Encoding)))
	}
	for _, ss := range s.StreamSubscriptions {
		cfg.StreamSubscriptions = append(cfg.StreamSubscriptions, &types.SubscriptionConfig{
			Paths: append([]string(nil), ss.Paths...), StreamMode: strings.ToLower(string(ss.Mode)),
			SampleInterval: durPtr(ss.SampleInterval), HeartbeatInterval: durPtr(ss.HeartbeatInterval),
			SuppressRedundant: ss.SuppressRedundant,
		})
	}
	return cfg
}

// undeliverable says why a Subscription cannot be sent to a collector, or "" when it can. gNMIc's history
// settings are time.Time values, which the collector's decoder (mapstructure with only the duration hook) refuses
// in every form: sent, they fail the whole apply of the Cluster; dropped, the Subscription would quietly stream
// live data instead of the history it asks for. So such a Subscription is left out and reported.
func undeliverable(sub *gnmicv1alpha1.Subscription) string {
	if h := sub.Spec.History; h != nil && (h.Snapshot != nil || h.Start != nil || h.End != nil) {
		return "spec.history is not decoded by gNMIc collectors (their config API cannot carry time values)"
	}
	return ""
}

// OutputDataDir is the collectors' writable directory (an emptyDir; the root filesystem is read-only): file
// outputs with a relative filename write there.
const OutputDataDir = "/var/lib/gnmic"

// outputConfig is the output's config object with its type and, for service-resolved outputs, the address.
func outputConfig(o *gnmicv1alpha1.Output, address string) map[string]any {
	cfg := configMap(o.Spec.Config)
	cfg["type"] = string(o.Spec.Type)
	if name, ok := cfg["filename"].(string); ok && o.Spec.Type == gnmicv1alpha1.OutputFile && name != "" && !path.IsAbs(name) {
		cfg["filename"] = path.Join(OutputDataDir, name)
	}
	if key, _, ok := gnmicv1alpha1.OutputAddressKey(o.Spec.Type); ok && address != "" {
		cfg[key] = address
	}
	return cfg
}

func inputConfig(in *gnmicv1alpha1.Input) map[string]any {
	cfg := configMap(in.Spec.Config)
	cfg["type"] = string(in.Spec.Type)
	return cfg
}

// processorConfig is gNMIc's processor entry: the type as the only key, holding the config.
func processorConfig(p *gnmicv1alpha1.Processor) map[string]any {
	return map[string]any{p.Spec.Type: configMap(p.Spec.Config)}
}

func configMap(raw *apiextensionsv1.JSON) map[string]any {
	m := map[string]any{}
	if raw != nil && len(raw.Raw) > 0 {
		_ = json.Unmarshal(raw.Raw, &m) // admission guarantees an object
	}
	if m == nil {
		m = map[string]any{}
	}
	return m
}

// ResolveServiceAddress formats a service address for an output type: host:port for nats, jetstream and kafka,
// http://host:port for prometheus_write and influxdb.
func ResolveServiceAddress(t gnmicv1alpha1.OutputType, host string, port int32) (string, error) {
	_, scheme, ok := gnmicv1alpha1.OutputAddressKey(t)
	if !ok {
		return "", fmt.Errorf("output type %s does not resolve service addresses", t)
	}
	hostPort := fmt.Sprintf("%s:%d", host, port)
	if scheme == "" {
		return hostPort, nil
	}
	return scheme + "://" + hostPort, nil
}

func optional(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func ptr[T any](v T) *T { return &v }

func dur(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

func durPtr(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	v := d.Duration
	return &v
}
