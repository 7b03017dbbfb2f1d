package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/etcdgate"
)

// podRecorder plays the kubelet as fakeHost does and records, at every
// poll, which images of etcd and kube-apiserver run.
type podRecorder struct {
	*fakeHost
	mu   sync.Mutex
	seen [][2]string // {etcd image, kube-apiserver image}
}

func (p *podRecorder) StaticPods(ctx context.Context) ([]api.StaticPodStatus, error) {
	pods, err := p.fakeHost.StaticPods(ctx)
	var etcd, apiserver string
	for _, pod := range pods {
		switch pod.Name {
		case "etcd-n1":
			etcd = pod.Image
		case "kube-apiserver-n1":
			apiserver = pod.Image
		}
	}
	p.mu.Lock()
	p.seen = append(p.seen, [2]string{etcd, apiserver})
	p.mu.Unlock()
	return pods, err
}

// scriptedEtcd answers the gate's samples from a script (the last entry
// repeats) and records which kube-apiserver manifest was in place at each.
type scriptedEtcd struct {
	manifest string // the kube-apiserver manifest's path
	mu       sync.Mutex
	script   []etcdgate.Sample
	calls    int
	apiAt    []string
}

func (e *scriptedEtcd) SampleEtcd(context.Context) (etcdgate.Sample, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := os.ReadFile(e.manifest)
	e.apiAt = append(e.apiAt, string(b))
	s := e.script[min(e.calls, len(e.script)-1)]
	s.Time = time.Now() // as the agent's sampler stamps it; no duration is asserted
	e.calls++
	return s, nil
}

func (e *scriptedEtcd) Close() error { return nil }

// threeMembers is a cluster led by cp-1 at index idx, with n1's member
// (cp-2) at cp2.
func threeMembers(idx, cp2 uint64) etcdgate.Sample {
	s := etcdgate.Sample{}
	for i, n := range []string{"cp-1", "cp-2", "cp-3"} {
		m := etcdgate.Member{ID: uint64(i + 1), Name: n, Leader: 1, RaftIndex: idx, AppliedIndex: idx}
		if n == "cp-2" {
			m.RaftIndex, m.AppliedIndex = cp2, cp2
		}
		s.Members = append(s.Members, m)
	}
	return s
}

// TestUpgradeStaticPodsEtcdFirst: a release moving etcd and the API server
// moves etcd alone first, gates on the etcd cluster (which holds while the
// restarted member catches up), and only then the API server; the result
// says how long and why the gate held.
func TestUpgradeStaticPodsEtcdFirst(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	oldAPI, newAPI := manifest("kube-apiserver", "k8s/apiserver:v1.33.0"), manifest("kube-apiserver", "k8s/apiserver:v1.34.0")
	oldEtcd, newEtcd := manifest("etcd", "k8s/etcd:3.5.21-0"), manifest("etcd", "k8s/etcd:3.6.4-0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(oldEtcd), 0o600))
	pods := &podRecorder{fakeHost: h}
	h.cfg.Pods = pods
	etcd := &scriptedEtcd{manifest: filepath.Join(dir, "kube-apiserver.yaml"), script: []etcdgate.Sample{
		threeMembers(100, 100), // before: three members
		threeMembers(120, 40),  // cp-2 restarted, replaying
		threeMembers(130, 110), // behind what the leader had (120)
		threeMembers(140, 140), // caught up
	}}
	h.cfg.OpenEtcd = func(context.Context) (EtcdSampler, error) { return etcd, nil }
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
		Version: "v1.34.0", Manifests: map[string]string{"kube-apiserver.yaml": newAPI, "etcd.yaml": newEtcd}}})
	res := coord.waitResult(t, "sp")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)

	pods.mu.Lock()
	defer pods.mu.Unlock()
	require.Contains(t, pods.seen, [2]string{"k8s/etcd:3.6.4-0", "k8s/apiserver:v1.33.0"}, "etcd ran new while the API server was still old")
	require.NotContains(t, pods.seen, [2]string{"k8s/etcd:3.5.21-0", "k8s/apiserver:v1.34.0"}, "the API server moved before etcd")
	etcd.mu.Lock()
	defer etcd.mu.Unlock()
	require.Equal(t, 4, etcd.calls, "one sample before, three for the gate")
	for i, m := range etcd.apiAt {
		require.Equal(t, oldAPI, m, "sample %d: the API server's manifest was written before the gate passed", i)
	}
	require.Contains(t, res.Details["etcdGate"], "over 2 samples; last: member cp-2 raft index behind: applied 110 < leader's 120")
	require.Equal(t, "k8s/etcd:3.5.21-0", res.Details["etcdPreviousImage"])
	require.Equal(t, "k8s/etcd:3.6.4-0", res.Details["etcdImage"])
	for name, want := range map[string]string{"kube-apiserver.yaml": newAPI, "etcd.yaml": newEtcd} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
}

// TestUpgradeStaticPodsEtcdGateTimeout: a gate that never passes fails the
// operation before the API server's manifest is written; the new etcd,
// which ran, stays (the cluster version may have moved: docs/etcd.md),
// and a later rollback of the operation keeps it too.
func TestUpgradeStaticPodsEtcdGateTimeout(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	oldAPI, oldEtcd, newEtcd := manifest("kube-apiserver", "k8s/apiserver:v1.33.0"), manifest("etcd", "k8s/etcd:3.5.21-0"), manifest("etcd", "k8s/etcd:3.6.4-0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(oldEtcd), 0o600))
	lost := threeMembers(100, 100)
	lost.Members = lost.Members[:2]
	etcd := &scriptedEtcd{manifest: filepath.Join(dir, "kube-apiserver.yaml"), script: []etcdgate.Sample{threeMembers(100, 100), lost}}
	h.cfg.OpenEtcd = func(context.Context) (EtcdSampler, error) { return etcd, nil }
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
		Version: "v1.34.0", TimeoutSeconds: 2,
		Manifests: map[string]string{"kube-apiserver.yaml": manifest("kube-apiserver", "k8s/apiserver:v1.34.0"), "etcd.yaml": newEtcd}}})
	res := coord.waitResult(t, "sp")
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, "etcd gate after 2s: member count 2, was 3 before this node's upgrade")
	require.Contains(t, res.Message, "etcd stays at etcd.yaml's new version")
	require.Contains(t, res.Message, "previous manifests restored")
	etcd.mu.Lock()
	for _, m := range etcd.apiAt {
		require.Equal(t, oldAPI, m)
	}
	etcd.mu.Unlock()
	files := map[string]string{"kube-apiserver.yaml": oldAPI, "etcd.yaml": newEtcd}
	for name, want := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}

	coord.enqueue(api.Operation{ID: "rb", Kind: api.OpRollback, Rollback: &api.Rollback{OperationID: "sp"}})
	rb := coord.waitResult(t, "rb")
	require.Equal(t, api.OpSucceeded, rb.State, rb.Message)
	require.Contains(t, rb.Details["kept"], "etcd.yaml: etcd is not rolled back")
	for name, want := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
}

// TestUpgradeStaticPodsEtcdNeverRan: a new etcd that does not run (bad
// image) is put back with every other manifest.
func TestUpgradeStaticPodsEtcdNeverRan(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	oldAPI, oldEtcd := manifest("kube-apiserver", "k8s/apiserver:v1.33.0"), manifest("etcd", "k8s/etcd:3.5.21-0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(oldEtcd), 0o600))
	etcd := &scriptedEtcd{manifest: filepath.Join(dir, "kube-apiserver.yaml"), script: []etcdgate.Sample{threeMembers(100, 100)}}
	h.cfg.OpenEtcd = func(context.Context) (EtcdSampler, error) { return etcd, nil }
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
		Version: "v1.34.0", TimeoutSeconds: 1,
		Manifests: map[string]string{"kube-apiserver.yaml": manifest("kube-apiserver", "k8s/apiserver:v1.34.0"), "etcd.yaml": manifest("etcd", "k8s/etcd:bad")}}})
	res := coord.waitResult(t, "sp")
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, "waiting for etcd (k8s/etcd:bad)")
	require.NotContains(t, res.Message, "etcd stays")
	for name, want := range map[string]string{"kube-apiserver.yaml": oldAPI, "etcd.yaml": oldEtcd} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
}

// TestUpgradeStaticPodsEtcdUnreachableBefore: an etcd the agent cannot
// sample before the upgrade fails the operation with nothing written.
func TestUpgradeStaticPodsEtcdUnreachableBefore(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	oldEtcd := manifest("etcd", "k8s/etcd:3.5.21-0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(oldEtcd), 0o600))
	h.cfg.OpenEtcd = func(context.Context) (EtcdSampler, error) {
		return nil, errors.New("dial tcp 127.0.0.1:2379: connection refused")
	}
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
		Version: "v1.34.0", Manifests: map[string]string{"etcd.yaml": manifest("etcd", "k8s/etcd:3.6.4-0")}}})
	res := coord.waitResult(t, "sp")
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, "etcd before its upgrade: dial tcp 127.0.0.1:2379: connection refused")
	b, err := os.ReadFile(filepath.Join(dir, "etcd.yaml"))
	require.NoError(t, err)
	require.Equal(t, oldEtcd, string(b))
}

// TestUpgradeStaticPodsEtcdCrashAtEveryStep: an agent killed at any step of
// the etcd part resumes it — the member count from before the upgrade kept
// in the journal, etcd's and the API server's manifests written once each.
func TestUpgradeStaticPodsEtcdCrashAtEveryStep(t *testing.T) {
	for _, step := range []string{StepBackedUp, StepEtcdWritten, StepEtcdRan, StepEtcdHealthy, StepWritten, StepHealthy} {
		t.Run(step, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			dir := filepath.Join(h.root, "etc/kubernetes/manifests")
			oldAPI, newAPI := manifest("kube-apiserver", "k8s/apiserver:v1.33.0"), manifest("kube-apiserver", "k8s/apiserver:v1.34.0")
			oldEtcd, newEtcd := manifest("etcd", "k8s/etcd:3.5.21-0"), manifest("etcd", "k8s/etcd:3.6.4-0")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(oldEtcd), 0o600))
			etcd := &scriptedEtcd{manifest: filepath.Join(dir, "kube-apiserver.yaml"), script: []etcdgate.Sample{threeMembers(100, 100)}}
			h.cfg.OpenEtcd = func(context.Context) (EtcdSampler, error) { return etcd, nil }
			op := api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
				Version: "v1.34.0", Manifests: map[string]string{"kube-apiserver.yaml": newAPI, "etcd.yaml": newEtcd}}}

			res := crashAndResume(t, coord, h, op, step, func() {})
			require.Equal(t, api.OpSucceeded, res.State, res.Message)
			for name, want := range map[string]string{"kube-apiserver.yaml": newAPI, "etcd.yaml": newEtcd} {
				b, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err)
				require.Equal(t, want, string(b))
			}
			require.Contains(t, res.Details["etcdGate"], "3 members healthy and started")
		})
	}
}
