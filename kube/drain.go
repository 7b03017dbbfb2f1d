package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// Reasons a pod is left behind by a drain (LeftPod.Reason).
const (
	// ReasonPDB: every eviction attempt was refused, normally with 429 by a
	// PodDisruptionBudget allowing no disruption.
	ReasonPDB = "pdb"
	// ReasonTerminating: the eviction was accepted but the pod was still
	// present when the drain timed out (kubelet gone, finalizer, long grace).
	ReasonTerminating = "terminating"
	// ReasonProtected: an automatic drain skipped a safe-to-evict=false pod
	// younger than ProtectionAge (SPEC §8).
	ReasonProtected = "protected"
)

// DrainOptions vary one drain.
type DrainOptions struct {
	// Automatic marks a drain started by an automatic upgrade. Only those
	// honour safe-to-evict=false for ProtectionAge; manual upgrades and
	// operator drains evict such pods (SPEC §8).
	Automatic bool
	// Delete deletes the pods instead of evicting them: PodDisruptionBudgets
	// do not hold them (blue/green's deletion of the blue pool, SPEC §7).
	// The grace period is capped at MaxGracePeriod as for evictions.
	Delete bool
	// Kind says what sort of node is drained, and so how long its drain
	// honours PodDisruptionBudgets and grace periods.
	Kind DrainKind
	// Timeout, when set, replaces the Kind's timeout for this drain (the
	// deletion of a blue pool's pods, bounded by its grace cap instead).
	Timeout time.Duration
}

// DrainKind is the sort of node a drain empties; each has its own bound.
type DrainKind int

// Kinds of drain.
const (
	// DrainNode is a node upgraded in place (a bare-metal node, a MIG
	// node of a blue/green pool): at most Config.DrainTimeout, 20 minutes
	// (SPEC §6).
	DrainNode DrainKind = iota
	// DrainSurge is a node of a MIG pool upgraded by surge (replaced, or
	// recreated when maxUnavailable allows): at most
	// Config.SurgeDrainTimeout, one hour, as GKE's surge upgrades honour
	// PodDisruptionBudgets and grace periods for up to an hour (SPEC §7).
	DrainSurge
)

// timeout is how long a drain of opts waits at most.
func (c Config) timeout(opts DrainOptions) time.Duration {
	switch {
	case opts.Timeout > 0:
		return opts.Timeout
	case opts.Kind == DrainSurge:
		return c.SurgeDrainTimeout
	}
	return c.DrainTimeout
}

// PodRef names a pod.
type PodRef struct {
	Namespace, Name string
}

// LeftPod is a pod a drain did not remove, and why.
type LeftPod struct {
	Namespace, Name string
	// Reason is ReasonPDB, ReasonTerminating or ReasonProtected.
	Reason string
	// EvictableAt is when a protected pod's protection ends; zero otherwise.
	EvictableAt time.Time
	// Message is a human-readable detail (the API's refusal, finalizers).
	Message string
}

// DrainResult reports a best-effort drain. Started and Finished come from
// the injected clock.
type DrainResult struct {
	// Evicted are the pods that left the node during the drain (deleted, or
	// replaced by a pod with the same name and a new UID).
	Evicted []PodRef
	// LeftBehind are the pods still on the node, sorted by namespace/name.
	// Protected pods appear here even when the drain did not time out.
	LeftBehind []LeftPod
	// TimedOut is true when DrainTimeout passed with pods still to evict or
	// still terminating.
	TimedOut bool
	// Started and Finished bracket the drain.
	Started, Finished time.Time
	// Workloads are the controllers of the Evicted pods (workloadsOf):
	// what should be back to its desired ready replicas once the pods
	// were rescheduled.
	Workloads []WorkloadRef
}

type podState int

const (
	stateEvict     podState = iota // eviction not yet accepted
	stateProtected                 // skipped: safe-to-evict=false, too young
	stateWaiting                   // eviction accepted (or already deleting)
	stateGone                      // left the node
)

// drainPod tracks one pod through a drain.
type drainPod struct {
	pod         corev1.Pod
	state       podState
	nextTry     time.Time // earliest next eviction attempt (PDB backoff)
	refusal     string    // last eviction refusal, for ReasonPDB
	evictableAt time.Time // for stateProtected
}

// Drain evicts the drainable pods of node through the Eviction API and waits
// for them to leave, for at most DrainTimeout, or SurgeDrainTimeout for a
// MIG surge node (opts.Kind; SPEC §6, §7, best effort).
//
// Each eviction carries the pod's grace period capped at MaxGracePeriod. A
// refusal (429 from a PodDisruptionBudget) is retried every EvictionBackoff.
// When opts.Automatic, safe-to-evict=false pods younger than ProtectionAge
// are not evicted and come back as ReasonProtected. When the timeout passes
// Drain stops waiting and returns TimedOut with every remaining pod in
// LeftBehind: that is a normal result, not an error, and the upgrade goes
// on. Errors are returned only for failed API calls and ctx cancellation,
// together with the partial result.
func (c *Client) Drain(ctx context.Context, node string, opts DrainOptions) (DrainResult, error) {
	clk := c.cfg.Clock
	res := DrainResult{Started: clk.Now()}
	timeout := c.cfg.timeout(opts)
	deadline := res.Started.Add(timeout)
	log := c.cfg.Logger.With("node", node, "automatic", opts.Automatic, "delete", opts.Delete)

	pods, err := c.drainablePods(ctx, node)
	if err != nil {
		res.Finished = clk.Now()
		return res, err
	}
	tracked := make([]*drainPod, len(pods))
	for i := range pods {
		tracked[i] = &drainPod{pod: pods[i]}
		if pods[i].DeletionTimestamp != nil {
			tracked[i].state = stateWaiting // someone else is deleting it
		}
	}
	log.Info("drain started", "pods", len(tracked), "timeout", timeout)

	for {
		now := clk.Now()
		for _, p := range tracked {
			if err := c.step(ctx, p, now, opts, log); err != nil {
				return c.result(res, tracked), err
			}
		}
		if err := c.observe(ctx, node, tracked, log); err != nil {
			return c.result(res, tracked), err
		}
		if !active(tracked) {
			break
		}
		if !now.Before(deadline) {
			res.TimedOut = true
			break
		}
		if err := c.sleep(ctx, min(c.cfg.PollInterval, deadline.Sub(now))); err != nil {
			return c.result(res, tracked), err
		}
	}
	res = c.result(res, tracked)
	var gone []corev1.Pod
	for _, p := range tracked {
		if p.state == stateGone {
			gone = append(gone, p.pod)
		}
	}
	res.Workloads = c.workloadsOf(ctx, gone)
	log.Info("drain finished", "evicted", len(res.Evicted), "leftBehind", len(res.LeftBehind),
		"timedOut", res.TimedOut, "took", res.Finished.Sub(res.Started))
	return res, nil
}

// step advances one pod that is not yet evicted: decides protection and,
// when its backoff has passed, tries the eviction.
func (c *Client) step(ctx context.Context, p *drainPod, now time.Time, opts DrainOptions, log *slog.Logger) error {
	if p.state != stateEvict && p.state != stateProtected {
		return nil
	}
	if opts.Automatic {
		if until, ok := c.protectedUntil(&p.pod); ok && now.Before(until) {
			if p.state != stateProtected {
				log.Info("pod protected", "pod", key(&p.pod), "evictableAt", until)
			}
			p.state, p.evictableAt = stateProtected, until
			return nil
		}
	}
	p.state = stateEvict
	if now.Before(p.nextTry) {
		return nil
	}
	evict := c.evict
	if opts.Delete {
		evict = c.deletePod
	}
	err := evict(ctx, &p.pod)
	switch {
	case err == nil:
		log.Info("pod evicted", "pod", key(&p.pod), "graceSeconds", c.graceSeconds(&p.pod), "deleted", opts.Delete)
		p.state = stateWaiting
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Deleted meanwhile, or the name now belongs to a replacement
		// (UID precondition failed): the pod we meant to evict is gone.
		p.state = stateGone
	case isPDBRefusal(err):
		if p.refusal == "" {
			log.Info("eviction refused, retrying", "pod", key(&p.pod), "reason", err.Error())
		}
		p.refusal = err.Error()
		p.nextTry = now.Add(c.cfg.EvictionBackoff)
	default:
		return apiErr("evict "+key(&p.pod), err)
	}
	return nil
}

// isPDBRefusal matches the Eviction API's refusals that time may resolve:
// 429 (a budget allows no disruption now, or is not yet processed) and 500
// "more than one PodDisruptionBudget", which an operator may fix.
func isPDBRefusal(err error) bool {
	return apierrors.IsTooManyRequests(err) ||
		(apierrors.IsInternalError(err) && strings.Contains(err.Error(), "PodDisruptionBudget"))
}

// observe lists the node's pods once and marks tracked pods that left the
// node (absent, or the name now has another UID) as gone. It refreshes the
// others, so a pod deleted by someone else counts as waiting and a start
// time reported later is used for protection.
func (c *Client) observe(ctx context.Context, node string, tracked []*drainPod, log *slog.Logger) error {
	list, err := c.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return apiErr("list pods on "+node, err)
	}
	current := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		current[key(&list.Items[i])] = &list.Items[i]
	}
	for _, p := range tracked {
		if p.state == stateGone {
			continue
		}
		cur, ok := current[key(&p.pod)]
		if !ok || cur.UID != p.pod.UID {
			log.Info("pod gone", "pod", key(&p.pod))
			p.state = stateGone
			continue
		}
		p.pod = *cur
		if cur.DeletionTimestamp != nil && p.state == stateEvict {
			p.state = stateWaiting
		}
	}
	return nil
}

func active(tracked []*drainPod) bool {
	for _, p := range tracked {
		if p.state == stateEvict || p.state == stateWaiting {
			return true
		}
	}
	return false
}

// result fills Evicted, LeftBehind and Finished from the tracked pods.
func (c *Client) result(res DrainResult, tracked []*drainPod) DrainResult {
	res.Finished = c.cfg.Clock.Now()
	res.Evicted, res.LeftBehind = nil, nil
	for _, p := range tracked {
		ref := PodRef{Namespace: p.pod.Namespace, Name: p.pod.Name}
		switch p.state {
		case stateGone:
			res.Evicted = append(res.Evicted, ref)
		case stateProtected:
			res.LeftBehind = append(res.LeftBehind, protectedLeft(&p.pod, p.evictableAt))
		case stateWaiting:
			res.LeftBehind = append(res.LeftBehind, LeftPod{
				Namespace: ref.Namespace, Name: ref.Name, Reason: ReasonTerminating,
				Message: terminatingMessage(&p.pod),
			})
		case stateEvict:
			msg := p.refusal
			if msg == "" {
				msg = "eviction not attempted"
			}
			res.LeftBehind = append(res.LeftBehind, LeftPod{
				Namespace: ref.Namespace, Name: ref.Name, Reason: ReasonPDB, Message: msg,
			})
		}
	}
	sortLeft(res.LeftBehind)
	return res
}

func terminatingMessage(p *corev1.Pod) string {
	var b strings.Builder
	b.WriteString("still terminating")
	if p.DeletionTimestamp != nil {
		fmt.Fprintf(&b, " since %s", p.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	if p.DeletionGracePeriodSeconds != nil {
		fmt.Fprintf(&b, " (grace %ds)", *p.DeletionGracePeriodSeconds)
	}
	if len(p.Finalizers) > 0 {
		fmt.Fprintf(&b, ", finalizers %v", p.Finalizers)
	}
	return b.String()
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
