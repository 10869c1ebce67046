package plan

import gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"

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

// TargetTLSFile is the key (and file name) of one PEM of a profile: namespace and name cannot contain "_", so keys
// of different profiles never collide.
func TargetTLSFile(namespace, profile, file string) string {
	return namespace + "_" + profile + "_" + file
}

func targetTLSPath(p *gnmicv1alpha1.TargetProfile, file string) *string {
	path := TargetTLSDir + "/" + TargetTLSFile(p.Namespace, p.Name, file)
	return &path
}
