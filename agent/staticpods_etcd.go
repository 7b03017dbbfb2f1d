package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// etcdPodName is the static pod of a stacked etcd member (kubeadm's name;
// the mirror pod is etcd-<node>).
const etcdPodName = "etcd"

// Journal steps of the etcd part of a static-pod upgrade.
const (
	StepEtcdWritten = "etcd-written" // etcd's new manifest in place; data: etcdMembers
	StepEtcdRan     = "etcd-ran"     // the kubelet ran the new etcd; data: etcdManifests
	StepEtcdHealthy = "etcd-healthy" // and the etcd gate passed; data: etcdGate
)

// upgradeEtcd writes etcd's new manifest alone, waits until the kubelet
// runs it and then until the etcd gate passes (agent/etcd_gate.go), so the
// other components move only on a whole etcd cluster. The member count
// the gate wants is read before the local member restarts. A host without
// etcd client credentials (no stacked etcd it can reach) moves etcd and
// waits for its pod only. On timeout the backup is restored: etcd's
// manifest too if its new pod never ran, every other one if it did
// (keptEtcdManifests).
func (r *run) upgradeEtcd(ctx context.Context, dir, backup string, names []string, manifests map[string]string, want []expectedPod, timeout time.Duration, details map[string]string) error {
	a := r.a
	details["etcdImage"] = want[0].image
	if prev, err := os.ReadFile(filepath.Join(backup, names[0])); err == nil {
		if pods, err := manifestPods(names[0], string(prev)); err == nil {
			details["etcdPreviousImage"] = pods[0].image
		}
	}
	if r.done(StepEtcdHealthy) {
		details["etcdGate"] = r.st.Data["etcdGate"]
		return nil
	}
	deadline := a.clock.Now().Add(timeout)
	es, err := a.openEtcd(ctx)
	switch {
	case errors.Is(err, ErrNoEtcd):
		details["etcdGate"] = "skipped: " + err.Error()
	case err != nil:
		// Nothing is written yet when this is the first attempt: refuse
		// to take a member down on a cluster the agent cannot see.
		if !r.done(StepEtcdWritten) {
			return fmt.Errorf("etcd before its upgrade: %w", err)
		}
		return r.failAndRestoreManifests(ctx, dir, backup, fmt.Errorf("etcd after its upgrade: %w", err))
	default:
		defer es.Close()
	}
	if !r.done(StepEtcdWritten) {
		data := map[string]string{}
		if es != nil {
			s, err := es.SampleEtcd(ctx)
			if err != nil {
				return fmt.Errorf("etcd before its upgrade: %w", err)
			}
			data["etcdMembers"] = strconv.Itoa(len(s.Members))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, name := range names {
			if err := writeFileAtomic(filepath.Join(dir, name), []byte(manifests[name]), 0o600); err != nil {
				return r.failAndRestoreManifests(ctx, dir, backup, fmt.Errorf("write %s: %w", name, err))
			}
		}
		if err := r.mark(ctx, StepEtcdWritten, data); err != nil {
			return err
		}
	}
	if err := a.waitPods(ctx, want, deadline.Sub(a.clock.Now())); err != nil {
		return r.failAndRestoreManifests(ctx, dir, backup, err)
	}
	details["etcdManifests"] = strings.Join(names, ",")
	if !r.done(StepEtcdRan) {
		if err := r.mark(ctx, StepEtcdRan, map[string]string{"etcdManifests": details["etcdManifests"]}); err != nil {
			return err
		}
	}
	gate := details["etcdGate"]
	if es != nil {
		members, _ := strconv.Atoi(r.st.Data["etcdMembers"])
		gate, err = a.etcdGate(ctx, es, members, max(deadline.Sub(a.clock.Now()), etcdGateInterval))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return r.failAndRestoreManifests(ctx, dir, backup, fmt.Errorf("%w (%s)", err, gate))
		}
	}
	details["etcdGate"] = gate
	return r.mark(ctx, StepEtcdHealthy, map[string]string{"etcdGate": gate})
}

// keptEtcdManifests are the manifests a restore of operation st leaves as
// they are: etcd's, once the kubelet ran the new etcd — whether or not the
// gate passed after it. From then on the etcd cluster may have moved its
// cluster version to the new minor (the leader does so as soon as every
// member runs it), and a member of the older minor then refuses to start:
// etcd goes back only through its own downgrade procedure
// (docs/etcd.md), never by swapping a manifest. A member of the newer
// version in a cluster still at the older cluster version is what a
// rolling etcd upgrade is made of, and the API servers of the previous
// release run on the newer etcd, as Kubernetes supports.
func keptEtcdManifests(st opState) []string {
	if !st.Steps[StepEtcdRan] || st.Data["etcdManifests"] == "" {
		return nil
	}
	return strings.Split(st.Data["etcdManifests"], ",")
}
