package testenv

// CrashLoopLabel marks the pods CrashLoopStage sends into CrashLoopBackOff (value CrashLoopValue); a Ready pod
// labelled later crashes then, as a container that starts failing mid-run.
const CrashLoopLabel = "testenv.quartet.dev/simulate"

// CrashLoopStage is a failure-injection stage for ClusterOptions.ExtraStages: a running pod labelled
// testenv.quartet.dev/simulate=crash-loop has its containers crash — not Ready, waiting in CrashLoopBackOff after
// three restarts — as a real kubelet reports a container that keeps exiting. It only matches Ready pods, so it
// applies once.
const CrashLoopStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: testenv-pod-crash-loop
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels:
      ` + CrashLoopLabel + `: crash-loop
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Running]
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ["True"]
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {type: ContainersReady, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "False", reason: ContainersNotReady, lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        imageID: ""
        ready: false
        started: false
        restartCount: 3
        lastState: {terminated: {exitCode: 1, reason: Error, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}
        state: {waiting: {reason: CrashLoopBackOff, message: "back-off restarting failed container"}}
      {{ end }}
`

// CrashLoopValue is the CrashLoopLabel value CrashLoopStage selects.
const CrashLoopValue = "crash-loop"
