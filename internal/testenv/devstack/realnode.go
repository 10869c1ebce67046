package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/images"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// NetprobeRef is the image of test/realnode/netprobe (a small HTTP server and client for traffic checks) that a
// development real node has imported, so a pod can run there without any registry.
const NetprobeRef = "quartet.test/netprobe:v1"

// RealNode is a real node started beside the simulated ones of `make dev`.
type RealNode struct {
	Node *realnode.Node
	// Took is how long the node took from the start of the image build until it was Ready.
	Took time.Duration
	dir  string
}

// StartRealNode builds the sandbox (pause) and netprobe images offline, starts a real node against env (a testenv
// cluster whose AdvertiseAddress is realnode.GatewayIP, as realnode.ClusterOptions sets) with both imported, and
// waits until it is Ready. The deadline is ctx's and the node's own (two minutes for Ready).
func StartRealNode(ctx context.Context, env *testenv.Env) (*RealNode, error) {
	if err := realnode.Preflight(); err != nil {
		return nil, err
	}
	started := time.Now()
	dir, err := os.MkdirTemp("", "quartet-dev-images-")
	if err != nil {
		return nil, err
	}
	archive, err := BuildNodeImages(ctx, dir, map[string]string{NetprobeRef: "./test/realnode/netprobe"})
	if err != nil {
		return nil, fmt.Errorf("building the real node's images: %w", joinRemove(err, dir))
	}
	node, err := realnode.Start(ctx, env, realnode.Options{ImageArchives: []string{archive}})
	if err != nil {
		return nil, joinRemove(err, dir)
	}
	return &RealNode{Node: node, Took: time.Since(started), dir: dir}, nil
}

// Stop tears the node down (realnode.Node.Stop checks that nothing is left) and removes the image archive.
func (r *RealNode) Stop(ctx context.Context) error {
	return joinRemove(r.Node.Stop(ctx), r.dir)
}

// Help says how to run a pod on the real node.
func (r *RealNode) Help() string {
	return fmt.Sprintf(`
A real node (%[1]s: containerd, runc, the kubelet, kube-proxy and kube-router's firewall; Ready in %[2]s) runs beside
the simulated ones. Only pods that tolerate its taint land there; images must be imported (%[3]s is):

  bin/k8s/kubectl run probe --image=%[3]s --image-pull-policy=Never \
    --overrides='{"spec":{"tolerations":[{"key":"%[4]s","operator":"Exists"}],"nodeSelector":{"%[5]s":"true"}}}'
`, r.Node.Name, r.Took.Round(100*time.Millisecond), NetprobeRef, realnode.Taint, realnode.NodeLabel)
}

// BuildNodeImages builds, in dir, the sandbox (pause) image and one static-binary image per entry of binaries
// (image ref → Go package of this repository) and writes them into one docker-archive tarball, whose path it
// returns.
func BuildNodeImages(ctx context.Context, dir string, binaries map[string]string) (string, error) {
	root := testenv.RepoRoot()
	pause := filepath.Join(dir, "pause")
	if err := images.GoBuild(ctx, root, "./internal/testenv/images/pause", pause); err != nil {
		return "", err
	}
	specs := []images.Spec{images.PauseSpec(pause)}
	i := 0
	for ref, pkg := range binaries {
		out := filepath.Join(dir, fmt.Sprintf("binary-%d", i))
		i++
		if err := images.GoBuild(ctx, root, pkg, out); err != nil {
			return "", err
		}
		specs = append(specs, images.StaticBinarySpec(ref, out))
	}
	imgs := map[string]v1.Image{}
	for _, spec := range specs {
		img, err := images.Build(spec)
		if err != nil {
			return "", err
		}
		imgs[spec.Ref] = img
	}
	archive := filepath.Join(dir, "images.tar")
	return archive, images.WriteArchive(archive, imgs)
}

// joinRemove removes dir and returns err joined with any failure to.
func joinRemove(err error, dir string) error { return errors.Join(err, os.RemoveAll(dir)) }

// NetprobePod is a pod of the netprobe image on the real node that the restricted Pod Security level admits:
// non-root, read-only root filesystem, no capabilities, the runtime's seccomp profile, serving /healthz on its
// "http" port (8080) with a readiness probe on it.
func NetprobePod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{realnode.NodeLabel: "true"},
			Tolerations:                   []corev1.Toleration{{Key: realnode.Taint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "netprobe", Image: NetprobeRef, ImagePullPolicy: corev1.PullNever,
				Args:  []string{"--listen=:8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1,
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}
