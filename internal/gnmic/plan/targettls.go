package plan

import (
	"crypto/sha256"
	"encoding/hex"

	ktypes "k8s.io/apimachinery/pkg/types"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// TargetTLSDir is where the collectors find the CA bundles and client certificates of TargetProfiles: gNMIc's
// target tls-ca, tls-cert and tls-key are file paths, so the operator gathers the PEMs into one Secret per Cluster
// mounted here. A changed Secret reaches the files without restarting the pods.
const TargetTLSDir = "/etc/gnmic/target-tls"

// Files of a profile in TargetTLSDir.
const (
	TargetTLSCA         = "ca.crt"
	TargetTLSCert       = "tls.crt"
	TargetTLSPrivateKey = "tls.key"
)

// TargetTLSFile is the key (and file name) of one PEM of a profile when the snapshot names no versioned key
// (TargetTLSKey) for it: namespace and name cannot contain "_", so keys of different profiles never collide.
func TargetTLSFile(namespace, profile, file string) string {
	return profileKeyPrefix(namespace, profile, len(file)+1) + "_" + file
}

// maxSecretKey is the longest key a Secret holds.
const maxSecretKey = 253

// profileKeyPrefix is "namespace_profile" when the key it starts (with suffix more characters) fits in a Secret
// key; else it is cut and ends with 12 hex of a digest of namespace/profile, so keys stay distinct and valid.
func profileKeyPrefix(namespace, profile string, suffix int) string {
	prefix := namespace + "_" + profile
	if len(prefix)+suffix <= maxSecretKey {
		return prefix
	}
	sum := sha256.Sum256([]byte(namespace + "/" + profile))
	tail := "-" + hex.EncodeToString(sum[:6])
	return prefix[:maxSecretKey-suffix-len(tail)] + tail
}

// TargetTLSKey is the key (and file name) of one PEM of a profile with a digest of its content in the name: new
// content is a new file, and so a new path in the target's config. gNMIc reads these files only when it dials a
// device, so a rotated CA bundle or client certificate under the same path would wait for the next reconnect; a
// changed path is a changed target, which the collector re-applies with the new files.
func TargetTLSKey(namespace, profile, file string, pem []byte) string {
	sum := sha256.Sum256(pem)
	rest := "_" + hex.EncodeToString(sum[:6]) + "_" + file
	return profileKeyPrefix(namespace, profile, len(rest)) + rest
}

// TargetTLSKeys are the keys of the target-tls Secret the collectors use for each profile: profile → file
// (TargetTLSCA, TargetTLSCert, TargetTLSPrivateKey) → key.
type TargetTLSKeys map[ktypes.NamespacedName]map[string]string

// targetTLSPath is the path of one of the profile's files in the pods: the key the snapshot chose, else the
// unversioned name.
func targetTLSPath(p *gnmicv1alpha1.TargetProfile, keys map[string]string, file string) *string {
	key, ok := keys[file]
	if !ok {
		key = TargetTLSFile(p.Namespace, p.Name, file)
	}
	path := TargetTLSDir + "/" + key
	return &path
}
