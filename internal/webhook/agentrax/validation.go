package agentrax

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// ValidateAgentDeployment returns every problem with an AgentDeployment's spec, each naming its field. old is the
// stored object on an update and nil on a create.
func ValidateAgentDeployment(ad, old *agentraxv1alpha1.AgentDeployment) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := ad.Spec
	if strings.TrimSpace(s.Image) == "" {
		errs = append(errs, field.Required(spec.Child("image"), "the agent's container image"))
	}
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, field.Invalid(spec.Child("port"), s.Port, "must be a port from 1 to 65535"))
	}
	if s.TenantRef == "" {
		errs = append(errs, field.Required(spec.Child("tenantRef"), "the name of a TenantQuota in the same namespace"))
	} else if msgs := validation.IsDNS1123Subdomain(s.TenantRef); len(msgs) > 0 {
		errs = append(errs, field.Invalid(spec.Child("tenantRef"), s.TenantRef, strings.Join(msgs, "; ")))
	}
	errs = append(errs, validateReplicas(spec.Child("replicas"), s.Replicas)...)
	errs = append(errs, validateRollout(spec.Child("rollout"), s.Rollout)...)
	errs = append(errs, validateProbe(spec.Child("readinessProbe"), s.ReadinessProbe, false)...)
	errs = append(errs, validateProbe(spec.Child("startupProbe"), s.StartupProbe, true)...)
	if s.MCP != nil {
		seen := map[string]bool{}
		for i, tool := range s.MCP.Tools {
			p := spec.Child("mcp", "tools").Index(i)
			switch {
			case strings.TrimSpace(tool) == "":
				errs = append(errs, field.Required(p, "tool names must not be empty"))
			case seen[tool]:
				errs = append(errs, field.Duplicate(p, tool))
			}
			seen[tool] = true
		}
	}
	if old != nil {
		if s.TenantRef != old.Spec.TenantRef {
			errs = append(errs, field.Forbidden(spec.Child("tenantRef"),
				fmt.Sprintf("is immutable (was %q): the agent's reservation lives in that TenantQuota", old.Spec.TenantRef)))
		}
	}
	return errs
}

func validateReplicas(p *field.Path, r agentraxv1alpha1.ReplicasSpec) field.ErrorList {
	var errs field.ErrorList
	if r.Min < 1 {
		errs = append(errs, field.Invalid(p.Child("min"), r.Min, "must be at least 1"))
	}
	if r.Max < 1 {
		errs = append(errs, field.Invalid(p.Child("max"), r.Max, "must be at least 1"))
	}
	if r.Min > r.Max {
		errs = append(errs, field.Invalid(p.Child("min"), r.Min, fmt.Sprintf("must not exceed replicas.max (%d)", r.Max)))
	}
	switch r.Metric {
	case agentraxv1alpha1.MetricQueueDepth, agentraxv1alpha1.MetricGPUUtilization:
	default:
		errs = append(errs, field.NotSupported(p.Child("metric"), r.Metric,
			[]string{string(agentraxv1alpha1.MetricQueueDepth), string(agentraxv1alpha1.MetricGPUUtilization)}))
	}
	if r.Target < 1 {
		errs = append(errs, field.Invalid(p.Child("target"), r.Target, "must be at least 1"))
	}
	return errs
}

// maxProgressDeadline bounds spec.rollout.progressDeadline: a rollout stuck for longer than a day is not waiting.
const maxProgressDeadline = 24 * time.Hour

func validateRollout(p *field.Path, r *agentraxv1alpha1.RolloutSpec) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	switch r.Strategy {
	case agentraxv1alpha1.StrategyRecreate, agentraxv1alpha1.StrategyCanary, "":
	default:
		errs = append(errs, field.NotSupported(p.Child("strategy"), r.Strategy,
			[]string{string(agentraxv1alpha1.StrategyRecreate), string(agentraxv1alpha1.StrategyCanary)}))
	}
	if d := r.ProgressDeadline; d != nil && (d.Duration < time.Second || d.Duration > maxProgressDeadline) {
		errs = append(errs, field.Invalid(p.Child("progressDeadline"), d.Duration.String(),
			"must be from 1s to 24h: every wait of a canary rollout ends at this deadline"))
	}
	full, paused := false, false
	// weight is the canary's share when a step runs: a pause before any non-zero setWeight judges a canary that
	// gets no traffic, so it could never gather samples and would hold until the pause cap.
	weight := int32(0)
	for i, step := range r.Steps {
		sp := p.Child("steps").Index(i)
		switch {
		case step.SetWeight == nil && step.Pause == nil:
			errs = append(errs, field.Required(sp, "each step needs exactly one of setWeight and pause"))
		case step.SetWeight != nil && step.Pause != nil:
			errs = append(errs, field.Invalid(sp, "setWeight and pause", "each step takes exactly one of setWeight and pause"))
		case step.SetWeight != nil:
			if w := *step.SetWeight; w < 0 || w > 100 {
				errs = append(errs, field.Invalid(sp.Child("setWeight"), w, "must be from 0 to 100"))
			} else {
				weight = w
				full = full || w == 100
			}
		default:
			paused = true
			if weight == 0 {
				errs = append(errs, field.Invalid(sp.Child("pause"), step.Pause.Duration.Duration.String(),
					"a pause judges the canary by its traffic: it must follow a setWeight above 0"))
			}
			if step.Pause.Duration.Duration <= 0 {
				errs = append(errs, field.Invalid(sp.Child("pause", "duration"), step.Pause.Duration.Duration.String(),
					"must be greater than zero"))
			}
		}
	}
	if r.Strategy == agentraxv1alpha1.StrategyCanary {
		if len(r.Steps) == 0 {
			errs = append(errs, field.Required(p.Child("steps"), "strategy Canary needs steps ending the rollout with setWeight: 100"))
		} else if !full {
			errs = append(errs, field.Invalid(p.Child("steps"), len(r.Steps),
				"strategy Canary needs at least one step with setWeight: 100, or the canary is never promoted"))
		}
		if len(r.Steps) > 0 && !paused {
			errs = append(errs, field.Invalid(p.Child("steps"), len(r.Steps),
				"strategy Canary needs at least one pause step: only pauses judge the canary, without one it would be promoted unevaluated"))
		}
		if r.Rollback == nil {
			errs = append(errs, field.Required(p.Child("rollback"),
				"strategy Canary needs rollback thresholds (maxErrorRate, maxP99LatencyMs, minRequestSample)"))
		}
	}
	if rb := r.Rollback; rb != nil {
		rp := p.Child("rollback")
		if _, err := quota.ParseErrorRate(rb.MaxErrorRate); err != nil {
			errs = append(errs, field.Invalid(rp.Child("maxErrorRate"), rb.MaxErrorRate, err.Error()))
		}
		if rb.MaxP99LatencyMs < 1 {
			errs = append(errs, field.Invalid(rp.Child("maxP99LatencyMs"), rb.MaxP99LatencyMs, "must be at least 1"))
		}
		if rb.MinRequestSample < 1 {
			errs = append(errs, field.Invalid(rp.Child("minRequestSample"), rb.MinRequestSample, "must be at least 1"))
		}
		switch rb.OnInsufficientSamples {
		case "", agentraxv1alpha1.InsufficientSamplesHold, agentraxv1alpha1.InsufficientSamplesRollback:
		default:
			errs = append(errs, field.NotSupported(rp.Child("onInsufficientSamples"), rb.OnInsufficientSamples,
				[]string{string(agentraxv1alpha1.InsufficientSamplesHold), string(agentraxv1alpha1.InsufficientSamplesRollback)}))
		}
	}
	errs = append(errs, validateTraffic(p.Child("traffic"), r.Traffic)...)
	if m := r.Metrics; m != nil {
		if err := canaryMetrics(m).Validate(); err != nil {
			errs = append(errs, field.Invalid(p.Child("metrics"), *m, err.Error()))
		}
	}
	return errs
}

// validateProbe checks what the API server would otherwise refuse only when the operator writes the Deployment
// (the agent would then never update): exactly one handler, no negative numbers, and successThreshold 1 for a
// startup probe.
func validateProbe(p *field.Path, probe *corev1.Probe, startup bool) field.ErrorList {
	if probe == nil {
		return nil
	}
	var errs field.ErrorList
	h := probe.ProbeHandler
	handlers := 0
	for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
		if set {
			handlers++
		}
	}
	if handlers != 1 {
		errs = append(errs, field.Invalid(p, handlers, "needs exactly one of exec, httpGet, tcpSocket and grpc"))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", probe.InitialDelaySeconds}, {"timeoutSeconds", probe.TimeoutSeconds},
		{"periodSeconds", probe.PeriodSeconds}, {"successThreshold", probe.SuccessThreshold},
		{"failureThreshold", probe.FailureThreshold}} {
		if f.v < 0 {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, "must not be negative"))
		}
	}
	if startup && probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), probe.SuccessThreshold, "must be 1 for a startup probe"))
	}
	return errs
}
