package provisioner

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	// As the API server's answer decodes (integers are int64, which kstatus insists on).
	j, err := yaml.ToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

const deploySpec = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: t, generation: 2}
spec: {replicas: 2, progressDeadlineSeconds: 60}
`

func TestHealthOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		yaml   string
		health Health
		msg    string
	}{
		{name: "a missing object waits", health: InProgress, msg: "not found"},
		{name: "a ConfigMap is current at once", yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			health: Current},
		{name: "a Deployment the controller has not seen waits", yaml: deploySpec, health: InProgress,
			msg: "Replicas: 0/2"},
		{name: "a Deployment behind its generation waits", yaml: deploySpec + `status: {observedGeneration: 1}`,
			health: InProgress, msg: "generation"},
		{name: "a Deployment with too few available replicas waits", yaml: deploySpec + `status:
  observedGeneration: 2
  replicas: 2
  updatedReplicas: 2
  readyReplicas: 1
  availableReplicas: 1
  conditions: [{type: Progressing, status: "True", reason: ReplicaSetUpdated}]`,
			health: InProgress, msg: "Available: 1/2"},
		{name: "an available Deployment is current", yaml: deploySpec + `status:
  observedGeneration: 2
  replicas: 2
  updatedReplicas: 2
  readyReplicas: 2
  availableReplicas: 2
  conditions:
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable}
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}`,
			health: Current, msg: "Deployment is available"},
		{name: "a Deployment past its progress deadline failed, with the controller's message", yaml: deploySpec + `status:
  observedGeneration: 2
  replicas: 2
  updatedReplicas: 2
  conditions:
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: 'ReplicaSet "web-1" has timed out progressing.'}`,
			health: Failed, msg: `Progress deadline exceeded: ReplicaSet "web-1" has timed out progressing.`},
		{name: "a failed Job failed", yaml: `apiVersion: batch/v1
kind: Job
metadata: {name: j, generation: 1}
spec: {completions: 1, parallelism: 1}
status: {failed: 1, conditions: [{type: Failed, status: "True", reason: BackoffLimitExceeded, message: "Job has reached the specified backoff limit"}]}`,
			health: Failed, msg: "Job Failed"},
		{name: "a custom resource whose Ready condition is False waits", yaml: `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {observedGeneration: 1, conditions: [{type: Ready, status: "False", reason: Pending, message: "waiting for db"}]}`,
			health: InProgress, msg: "waiting for db"},
		{name: "a custom resource reporting Stalled failed", yaml: `apiVersion: example.com/v1
kind: Widget
metadata: {name: w, generation: 1}
status: {observedGeneration: 1, conditions: [{type: Stalled, status: "True", reason: BadSpec, message: "size must be positive"}]}`,
			health: Failed, msg: "size must be positive"},
		{name: "a terminating object waits", yaml: `apiVersion: v1
kind: ConfigMap
metadata: {name: c, deletionTimestamp: "2026-01-01T00:00:00Z"}`, health: InProgress, msg: "Terminating"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var u *unstructured.Unstructured
			if tc.yaml != "" {
				u = obj(t, tc.yaml)
			}
			h, msg := HealthOf(u)
			g.Expect(h).To(Equal(tc.health), msg)
			g.Expect(msg).To(ContainSubstring(tc.msg))
		})
	}
}

func TestVerifyDeadline(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		ctxLeft  time.Duration // 0: the call has no deadline
		deadline time.Duration // after start
		byCall   bool
	}{
		{name: "no call deadline: the verify timeout", timeout: 3 * time.Minute, deadline: 3 * time.Minute},
		{name: "call deadline well after the timeout", timeout: 3 * time.Minute, ctxLeft: 5 * time.Minute,
			deadline: 3 * time.Minute},
		{name: "call deadline first: 5% margin", timeout: 3 * time.Minute, ctxLeft: 100 * time.Second,
			deadline: 95 * time.Second, byCall: true},
		{name: "margin at least 1s", timeout: time.Minute, ctxLeft: 6 * time.Second, deadline: 5 * time.Second,
			byCall: true},
		{name: "margin at most 10s", timeout: time.Hour, ctxLeft: 20 * time.Minute, deadline: 20*time.Minute - 10*time.Second,
			byCall: true},
		{name: "timeout just inside the margin", timeout: 90 * time.Second, ctxLeft: 100 * time.Second,
			deadline: 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d, byCall := verifyDeadline(start, tc.timeout, start.Add(tc.ctxLeft), tc.ctxLeft > 0)
			g.Expect(d).To(Equal(start.Add(tc.deadline)))
			g.Expect(byCall).To(Equal(tc.byCall))
		})
	}
}

func TestTargetVerifyTimeout(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  *time.Duration
		err   bool
	}{
		{value: ""},
		{value: "0", want: new(time.Duration)},
		{value: "10m", want: func() *time.Duration { d := 10 * time.Minute; return &d }()},
		{value: "-1s", err: true},
		{value: "soon", err: true},
	} {
		g := NewWithT(t)
		got, err := TargetVerifyTimeout(tc.value)
		if tc.err {
			g.Expect(err).To(MatchError(ContainSubstring("data.verify-timeout: Invalid value")), tc.value)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), tc.value)
		g.Expect(got).To(Equal(tc.want), tc.value)
	}
}
