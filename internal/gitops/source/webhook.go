package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// Webhook Secret: in the namespace of the URL, holding the shared HMAC secret.
const (
	WebhookSecretName = "github-webhook-secret"
	WebhookSecretKey  = "webhook-secret"
	// maxBody bounds what is read before the signature is checked. GitHub caps payloads at 25 MB, but a push
	// payload lists at most 20 commits with their file names: 5 MiB leaves room and keeps an unauthenticated
	// sender from making each request cost 25 MiB.
	maxBody = 5 << 20
	// bodyReadTimeout bounds reading the body (a slow sender holds a connection only this long).
	bodyReadTimeout = 10 * time.Second
)

func reply(w http.ResponseWriter, code int, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Mux serves POST /webhook/{namespace}, GET /healthz and the registration API (/api/v1/namespaces/{namespace}/sourcetargets).
func (h *Handler) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook/{namespace}", h.ServeWebhook)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	h.registerRoutes(mux)
	return mux
}

// ServeWebhook handles a GitHub push: 404 without the namespace's webhook Secret, 401 on a bad signature, 400 on
// an unparsable payload, 200 for events it ignores (not a push, a deleted branch, no matching source target) and
// 202 with the event ID once every matching target is leased for the event (503 naming the targets whose lease
// could not be taken; those that were leased still run). Cloning and streaming run asynchronously.
func (h *Handler) ServeWebhook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := logf.FromContext(ctx).WithName("webhook")
	ns := r.PathValue("namespace")
	secret := &corev1.Secret{}
	if err := h.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: WebhookSecretName}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			reply(w, http.StatusNotFound, map[string]any{"error": "no webhook secret in namespace " + ns})
			return
		}
		log.Error(err, "reading the webhook secret", "namespace", ns)
		reply(w, http.StatusInternalServerError, map[string]any{"error": "reading the webhook secret"})
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			reply(w, http.StatusRequestEntityTooLarge, map[string]any{"error": fmt.Sprintf("body over %d bytes", maxBody)})
			return
		}
		reply(w, http.StatusBadRequest, map[string]any{"error": "reading the body"})
		return
	}
	if !VerifySignature(secret.Data[WebhookSecretKey], body, r.Header.Get("X-Hub-Signature-256")) {
		reply(w, http.StatusUnauthorized, map[string]any{"error": "signature mismatch"})
		return
	}
	if ev := r.Header.Get("X-GitHub-Event"); ev != "push" {
		reply(w, http.StatusOK, map[string]any{"status": "ignored", "reason": "event " + ev + " is not a push"})
		return
	}
	push, err := ParsePush(body)
	if err != nil {
		reply(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	if push.Deleted {
		reply(w, http.StatusOK, map[string]any{"status": "ignored", "reason": "branch deleted"})
		return
	}
	// Only pushes acted on are remembered: a ping or an unparsable body says nothing about a later delivery.
	delivery := deliveryKeys(ns, r.Header.Get("X-GitHub-Delivery"), body)
	if !h.deliveries.claim(delivery, time.Now()) {
		reply(w, http.StatusOK, map[string]any{"status": "ignored", "reason": "delivery already received (a replay)"})
		return
	}
	// A failure on our side lets GitHub (or an operator) redeliver.
	failed := func() { h.deliveries.release(delivery) }
	cms, err := h.Targets(ctx, ns)
	if err != nil {
		log.Error(err, "listing source targets", "namespace", ns)
		failed()
		reply(w, http.StatusInternalServerError, map[string]any{"error": "listing source targets"})
		return
	}
	var targets []Target
	// elsewhere are the matching targets pinned to another Platform (pin.go): that Platform's source handler
	// deploys them (its own webhook, poll or replay), this one must not deploy them a second time.
	var elsewhere []string
	for i := range cms {
		t, err := TargetFromConfigMap(&cms[i])
		if err != nil {
			log.Info("skipping an invalid source target", "error", err.Error())
			continue
		}
		if cms[i].Annotations[AnnotationSuspend] == "true" || !t.Matches(push) {
			continue
		}
		if err := servedHere(&cms[i], h.Lease.Platform); err != nil {
			log.Info("leaving a source target to its Platform", "reason", err.Error())
			elsewhere = append(elsewhere, err.Error())
			continue
		}
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		reason := "no source target matches"
		if len(elsewhere) > 0 {
			reason = strings.Join(elsewhere, "; ")
		}
		reply(w, http.StatusOK, map[string]any{"status": "ignored", "reason": reason})
		return
	}
	targets, stale, err := h.atHead(ctx, targets, push)
	if err != nil {
		log.Error(err, "reading the head of the pushed ref", "namespace", ns)
		failed()
		reply(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error()})
		return
	}
	if len(targets) == 0 {
		reply(w, http.StatusOK, map[string]any{"status": "ignored", "reason": stale})
		return
	}
	ectx, span := startEvent(EventWebhook, h.Tenant(ctx, ns),
		attribute.String("github.delivery_id", r.Header.Get("X-GitHub-Delivery")),
		attribute.String("github.head_commit", push.After))
	eventID := span.SpanContext().TraceID().String()
	// The leases are taken before the answer: each records this event and its commit on its target, so once
	// GitHub has its 202 (and will not deliver again) a crash loses nothing: Replay finds the targets by the
	// event ID and pharos's crash detection replays them. A lease not taken is not accepted.
	jobs, pinned, lerr := h.leaseAll(contextWith(h.baseCtx(), ectx), targets, push.After)
	elsewhere = append(elsewhere, pinned...)
	if len(jobs) > 0 {
		h.inflight.Add(1)
		go func() {
			defer h.inflight.Done()
			h.runEvent(span, jobs, lerr)
		}()
	} else {
		stage.End(span, lerr)
		if lerr != nil {
			failed()
		}
	}
	if lerr != nil {
		log.Error(lerr, "taking the leases of a push", "namespace", ns, "event", eventID)
		reply(w, http.StatusServiceUnavailable, map[string]any{"event_id": eventID, "source_targets": len(jobs),
			"error": "taking the leases: " + lerr.Error()})
		return
	}
	answer := map[string]any{"event_id": eventID, "source_targets": len(targets)}
	if len(elsewhere) > 0 {
		answer["not_served"] = elsewhere
	}
	reply(w, http.StatusAccepted, answer)
}

// leaseWorkers bounds the lease updates one push makes at once.
const leaseWorkers = 8

// leaseTimeout bounds taking the leases of one push, which the sender waits for (GitHub gives up after 10s).
const leaseTimeout = 8 * time.Second

// leaseAll starts a target span and takes the lease for each target (leaseWorkers at once, within leaseTimeout)
// and returns the jobs leased, the targets another Platform pinned meanwhile (no failure: that Platform serves
// them) and the failures, each naming its target.
func (h *Handler) leaseAll(ctx context.Context, targets []Target, commit string) ([]*job, []string, error) {
	lctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		jobs      []*job
		elsewhere []string
		errs      []error
	)
	sem := make(chan struct{}, leaseWorkers)
	for _, t := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			j, err := h.newJob(ctx, lctx, t, commit)
			mu.Lock()
			defer mu.Unlock()
			if _, ok := errors.AsType[*NotServed](err); ok {
				elsewhere = append(elsewhere, err.Error())
				return
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", t.Namespace, t.Name, err))
				return
			}
			jobs = append(jobs, j)
		})
	}
	wg.Wait()
	return jobs, elsewhere, errors.Join(errs...)
}

// headCheckTimeout bounds reading the heads of a push's ref, which the sender waits for.
const headCheckTimeout = 5 * time.Second

// atHead keeps the targets whose ref's current head is the pushed commit: only the head is deployed, so a captured
// delivery replayed later (the delivery memory is per process) or an older push arriving late deploys nothing.
// The head is read once per repository, credentials and ref. stale says why targets were dropped.
func (h *Handler) atHead(ctx context.Context, targets []Target, push Push) (kept []Target, stale string, err error) {
	ctx, cancel := context.WithTimeout(ctx, headCheckTimeout)
	defer cancel()
	heads := map[string]string{}
	for _, t := range targets {
		key := t.Namespace + "/" + t.CredentialSecret + "|" + NormalizeRepoURL(t.RepoURL) + "|" + NormalizeRef(t.Ref)
		head, ok := heads[key]
		if !ok {
			auth, err := h.auth(ctx, t)
			if err != nil {
				return nil, "", fmt.Errorf("source target %s/%s: %w", t.Namespace, t.Name, err)
			}
			if head, err = h.resolveRef(ctx, t, auth); err != nil {
				return nil, "", fmt.Errorf("source target %s/%s: reading the head of %s: %w", t.Namespace, t.Name, push.Ref, err)
			}
			heads[key] = head
		}
		if head == push.After {
			kept = append(kept, t)
			continue
		}
		stale = fmt.Sprintf("commit %s is not the head of %s (the head is %s): only the head is deployed", push.After, push.Ref, head)
	}
	return kept, stale, nil
}
