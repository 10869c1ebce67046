package agentrax

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// Reasons of the MCPHandshakeFailed condition.
const (
	// ReasonHandshakeFailed: discovery failed, or the third heartbeat in a row did (the agent was deregistered).
	ReasonHandshakeFailed = "HandshakeFailed"
	// ReasonRegistered: the agent answered the MCP handshake and is registered.
	ReasonRegistered = "Registered"
)

// RegistryRetryInterval is how soon a registration is retried when the registry could not record it (this
// replica's registry has not finished taking over after an election, or the ConfigMap write failed).
var RegistryRetryInterval = time.Second

// HeartbeatIntervaler is implemented by a Registrar whose registrations need heartbeats: the reconciler comes
// back to every registered agent after that interval, without waiting for another event.
type HeartbeatIntervaler interface {
	HeartbeatInterval() time.Duration
}

// Waker is implemented by a Registrar that probes agents off the reconcile workers: it calls the function given
// with an agent's key when a probe finished, and the controller reconciles that agent at once.
type Waker interface {
	SetWake(func(registry.Key))
}

// setupWakeups turns a Waker's wake-ups into reconcile requests.
func (r *AgentDeploymentReconciler) setupWakeups(b *builder.Builder) {
	w, ok := r.Registrar.(Waker)
	if !ok {
		return
	}
	wakeups := make(chan event.GenericEvent, 1024)
	w.SetWake(func(k registry.Key) {
		// Sent from the probe's own goroutine, never a reconcile worker's: waiting for room here is harmless.
		wakeups <- event.GenericEvent{Object: &agentraxv1alpha1.AgentDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}}
	})
	b.WatchesRawSource(source.Channel(wakeups, &handler.EnqueueRequestForObject{}))
}

// reconcileRegistration registers an exposed, running agent (the Registrar decides between a discovery, a
// heartbeat and nothing) and deregisters one that is no longer exposed or has no available pod left. A failed handshake, or the
// third failed heartbeat in a row, sets MCPHandshakeFailed and status.registered=false; the discovery is
// retried at the health interval.
func (r *AgentDeploymentReconciler) reconcileRegistration(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, obs *observed) error {
	expose := ad.Spec.MCP != nil && ad.Spec.MCP.Expose
	available := int32(0)
	if obs.deployment != nil {
		available = obs.deployment.Status.AvailableReplicas
	}
	// An agent is registered once it runs replicas.min pods, and stays registered while any pod serves: a rolling
	// update or a drain that takes it below min for a while is no reason to withdraw it (and rediscover it).
	running := available >= ad.Spec.Replicas.Min || (ad.Status.Registered && available > 0)
	if !expose || !running {
		if ad.Status.Registered {
			if err := r.Registrar.Deregister(ctx, ad); err != nil {
				return err
			}
		}
		if !expose {
			// No handshake is attempted any more; an old failure would mislead.
			meta.RemoveStatusCondition(&ad.Status.Conditions, agentraxv1alpha1.ConditionMCPHandshakeFailed)
		}
		return nil
	}
	ok, err := r.Registrar.Register(ctx, ad)
	interval := time.Duration(0)
	if h, isH := r.Registrar.(HeartbeatIntervaler); isH {
		interval = h.HeartbeatInterval()
	}
	switch {
	case err == nil:
		obs.registered = ok
		if c := meta.FindStatusCondition(ad.Status.Conditions, agentraxv1alpha1.ConditionMCPHandshakeFailed); c != nil &&
			c.Status != metav1.ConditionFalse {
			setCondition(ad, agentraxv1alpha1.ConditionMCPHandshakeFailed, metav1.ConditionFalse, ReasonRegistered,
				"the agent answered the MCP handshake and is registered")
		}
	case errors.Is(err, registry.ErrHandshake):
		obs.registered = false
		setCondition(ad, agentraxv1alpha1.ConditionMCPHandshakeFailed, metav1.ConditionTrue, ReasonHandshakeFailed, err.Error())
		if ad.Status.Registered {
			r.Recorder.Eventf(ad, nil, corev1.EventTypeWarning, "Deregistered", "Heartbeat",
				"removed from the MCP registry: %v", err)
		}
	default:
		// Not the agent's fault: keep what the status says and come back soon.
		obs.registered = ad.Status.Registered
		ctrl.LoggerFrom(ctx).Error(err, "MCP registration not recorded; retrying")
		r.Recorder.Eventf(ad, nil, corev1.EventTypeWarning, "RegistryUnavailable", "Register",
			"the MCP registry could not record the registration: %v", err)
		interval = RegistryRetryInterval
	}
	obs.requeueAfter(interval)
	return nil
}

// requeueAfter asks for the reconcile to come back after d (the earliest of all requests wins).
func (o *observed) requeueAfter(d time.Duration) {
	if d > 0 && (o.requeue == 0 || d < o.requeue) {
		o.requeue = d
	}
}
