package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ErrRollout means applied workloads did not finish rolling out: the
// deadline passed first, or a Deployment exceeded its progress deadline.
// The error names each unfinished object and its counts.
var ErrRollout = errors.New("kube: rollout not finished")

// Rollout is where one object's rollout stands.
type Rollout struct {
	// Done: every replica or scheduled pod runs the object's current
	// spec and is available.
	Done bool
	// Failed: the rollout cannot finish by waiting (a Deployment past its
	// progress deadline).
	Failed bool
	// Detail gives the counts, e.g. "3 of 7 updated, 2 of 7 available".
	Detail string
}

// DaemonSetRollout decides whether a DaemonSet rolled out: the controller
// saw its current generation, and on every node it should run on, the pod
// is of that generation and available
// (observedGeneration ≥ generation, updatedNumberScheduled ==
// numberAvailable == desiredNumberScheduled).
func DaemonSetRollout(ds *appsv1.DaemonSet) Rollout {
	st := ds.Status
	if st.ObservedGeneration < ds.Generation {
		return Rollout{Detail: fmt.Sprintf("generation %d not yet observed (observed %d)", ds.Generation, st.ObservedGeneration)}
	}
	detail := fmt.Sprintf("%d of %d updated, %d of %d available", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberAvailable, st.DesiredNumberScheduled)
	done := st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled
	return Rollout{Done: done, Detail: detail}
}

// DeploymentRollout decides whether a Deployment rolled out, as `kubectl
// rollout status` does: the controller saw its current generation, every
// desired replica is updated and available, and no old replica is left.
// A Progressing condition with reason ProgressDeadlineExceeded fails it.
func DeploymentRollout(d *appsv1.Deployment) Rollout {
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return Rollout{Detail: fmt.Sprintf("generation %d not yet observed (observed %d)", d.Generation, st.ObservedGeneration)}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	detail := fmt.Sprintf("%d of %d updated, %d of %d available, %d total", st.UpdatedReplicas, want, st.AvailableReplicas, want, st.Replicas)
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return Rollout{Failed: true, Detail: detail + ": progress deadline exceeded: " + c.Message}
		}
	}
	switch {
	case st.UpdatedReplicas < want:
		return Rollout{Detail: detail}
	case st.Replicas > st.UpdatedReplicas:
		return Rollout{Detail: fmt.Sprintf("%s: %d old replicas pending termination", detail, st.Replicas-st.UpdatedReplicas)}
	case st.AvailableReplicas < st.UpdatedReplicas:
		return Rollout{Detail: detail}
	}
	return Rollout{Done: true, Detail: detail}
}

// rolloutOf decides for an object as the API server returned it. Kinds
// without a rollout (ConfigMaps, Services, RBAC, ...) are done once applied.
func rolloutOf(u *unstructured.Unstructured) (Rollout, error) {
	if u.GroupVersionKind().Group != appsv1.GroupName {
		return Rollout{Done: true}, nil
	}
	switch u.GetKind() {
	case "DaemonSet":
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
			return Rollout{}, fmt.Errorf("%w: DaemonSet %s/%s: %w", ErrManifest, u.GetNamespace(), u.GetName(), err)
		}
		return DaemonSetRollout(&ds), nil
	case "Deployment":
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
			return Rollout{}, fmt.Errorf("%w: Deployment %s/%s: %w", ErrManifest, u.GetNamespace(), u.GetName(), err)
		}
		return DeploymentRollout(&d), nil
	}
	return Rollout{Done: true}, nil
}

// WaitRollout waits until every object in objs has rolled out (DaemonSets
// and Deployments; other kinds are done at once), re-reading every
// PollInterval on the injected clock. It returns when all are done, with
// an ErrRollout naming the object when a Deployment's rollout failed, and
// with an ErrRollout naming every unfinished object and its counts when
// ctx ends first: the caller's context is the deadline. API errors that
// repeating may cure (Transient) are waited through, like a rollout that
// is not done yet.
func (c *Client) WaitRollout(ctx context.Context, objs []ObjectRef) error {
	pending := objs
	// last is each object's last known state: a read that the deadline
	// cut short does not hide the counts the error should name.
	last := map[ObjectRef]string{}
	for {
		var still []ObjectRef
		for _, ref := range pending {
			r, err := c.rollout(ctx, ref)
			switch {
			case err != nil && ctx.Err() != nil:
			case err != nil && Transient(err):
				c.cfg.Logger.Warn("rollout: object not read; still waiting", "object", ref.String(), "err", err)
				if last[ref] == "" {
					last[ref] = "not read: " + err.Error()
				}
			case err != nil:
				return err
			case r.Failed:
				return fmt.Errorf("%w: %s: %s", ErrRollout, ref, r.Detail)
			case r.Done:
				if r.Detail != "" {
					c.cfg.Logger.Info("rolled out", "object", ref.String(), "status", r.Detail)
				}
				continue
			default:
				last[ref] = r.Detail
			}
			still = append(still, ref)
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		if err := c.sleep(ctx, c.cfg.PollInterval); err != nil {
			notDone := make([]string, 0, len(still))
			for _, ref := range still {
				d := last[ref]
				if d == "" {
					d = "not read before the deadline"
				}
				notDone = append(notDone, ref.String()+": "+d)
			}
			return fmt.Errorf("%w: %s: %w", ErrRollout, strings.Join(notDone, "; "), err)
		}
	}
}

// rollout reads one object and decides where its rollout stands.
func (c *Client) rollout(ctx context.Context, ref ObjectRef) (Rollout, error) {
	ri, err := c.resource(ref.APIVersion, ref.Kind, ref.Namespace)
	if err != nil {
		return Rollout{}, err
	}
	u, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return Rollout{}, apiErr("get "+ref.String(), err)
	}
	return rolloutOf(u)
}
