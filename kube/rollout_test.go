package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

func TestDaemonSetRollout(t *testing.T) {
	ds := func(gen, observed int64, desired, updated, available int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired,
				UpdatedNumberScheduled: updated, NumberAvailable: available},
		}
	}
	cases := []struct {
		name   string
		ds     *appsv1.DaemonSet
		done   bool
		detail string
	}{
		{"rolled out", ds(2, 2, 7, 7, 7), true, "7 of 7 updated, 7 of 7 available"},
		{"controller saw a newer generation", ds(2, 3, 7, 7, 7), true, "7 of 7 updated, 7 of 7 available"},
		{"new generation not observed", ds(3, 2, 7, 7, 7), false, "generation 3 not yet observed (observed 2)"},
		{"pods of the old spec left", ds(2, 2, 7, 3, 7), false, "3 of 7 updated, 7 of 7 available"},
		{"updated but not yet available", ds(2, 2, 7, 7, 5), false, "7 of 7 updated, 5 of 7 available"},
		{"no node to run on", ds(1, 1, 0, 0, 0), true, "0 of 0 updated, 0 of 0 available"},
		{"never seen by a controller", ds(1, 0, 0, 0, 0), false, "generation 1 not yet observed (observed 0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := kube.DaemonSetRollout(c.ds)
			require.Equal(t, kube.Rollout{Done: c.done, Detail: c.detail}, r)
		})
	}
}

func TestDeploymentRollout(t *testing.T) {
	dep := func(gen, observed int64, replicas, total, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: gen},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: total,
				UpdatedReplicas: updated, AvailableReplicas: available, Conditions: conds},
		}
	}
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "dns-7f" has timed out progressing.`}
	cases := []struct {
		name string
		d    *appsv1.Deployment
		want kube.Rollout
	}{
		{"rolled out", dep(2, 2, 2, 2, 2, 2), kube.Rollout{Done: true, Detail: "2 of 2 updated, 2 of 2 available, 2 total"}},
		{"not observed", dep(3, 2, 2, 2, 2, 2), kube.Rollout{Detail: "generation 3 not yet observed (observed 2)"}},
		{"updating", dep(2, 2, 2, 3, 1, 2), kube.Rollout{Detail: "1 of 2 updated, 2 of 2 available, 3 total"}},
		{"old replicas terminating", dep(2, 2, 2, 3, 2, 2), kube.Rollout{Detail: "2 of 2 updated, 2 of 2 available, 3 total: 1 old replicas pending termination"}},
		{"updated, not available", dep(2, 2, 2, 2, 2, 1), kube.Rollout{Detail: "2 of 2 updated, 1 of 2 available, 2 total"}},
		{"progress deadline exceeded", dep(2, 2, 2, 3, 1, 2, deadline), kube.Rollout{Failed: true,
			Detail: `1 of 2 updated, 2 of 2 available, 3 total: progress deadline exceeded: ReplicaSet "dns-7f" has timed out progressing.`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, kube.DeploymentRollout(c.d))
		})
	}
	nilReplicas := dep(1, 1, 0, 1, 1, 1)
	nilReplicas.Spec.Replicas = nil
	require.True(t, kube.DeploymentRollout(nilReplicas).Done, "replicas unset means 1")
}

// realClockClient is an admin client on the real clock that polls every
// 50 ms: rollout waits are bounded by their context, which is real time.
func realClockClient(t *testing.T, cp *kubetest.ControlPlane) *kube.Client {
	t.Helper()
	cfg, _ := testConfig(t, t0)
	cfg.Clock = clock.RealClock{}
	cfg.PollInterval = 50 * time.Millisecond
	c, err := kube.NewFromKubeconfig(cfg, cp.Kubeconfig)
	require.NoError(t, err)
	return c
}

// The harness runs no DaemonSet or Deployment controller, so the status
// the test writes is the status the wait sees.
func TestWaitRollout(t *testing.T) {
	cp := kubetest.Shared(t)
	c := realClockClient(t, cp)
	ctx := context.Background()
	ns := cp.Namespace(t)
	refs, err := c.Apply(ctx, addonManifests(ns, kubetest.UniqueName("proxier"), "v1"))
	require.NoError(t, err)

	wait := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return c.WaitRollout(ctx, refs)
	}
	err = wait(300 * time.Millisecond)
	require.ErrorIs(t, err, kube.ErrRollout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "DaemonSet "+ns+"/proxy: generation 1 not yet observed (observed 0)")
	require.ErrorContains(t, err, "Deployment "+ns+"/dns: generation 1 not yet observed (observed 0)")
	require.NotContains(t, err.Error(), "ConfigMap", "objects without a rollout are done once applied")

	dsStatus := func(updated, available int32) {
		t.Helper()
		ds, err := cp.Clientset.AppsV1().DaemonSets(ns).Get(ctx, "proxy", metav1.GetOptions{})
		require.NoError(t, err)
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3,
			CurrentNumberScheduled: 3, UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available}
		_, err = cp.Clientset.AppsV1().DaemonSets(ns).UpdateStatus(ctx, ds, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	depStatus := func(updated, available int32, conds ...appsv1.DeploymentCondition) {
		t.Helper()
		d, err := cp.Clientset.AppsV1().Deployments(ns).Get(ctx, "dns", metav1.GetOptions{})
		require.NoError(t, err)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, UpdatedReplicas: updated,
			AvailableReplicas: available, ReadyReplicas: available, Conditions: conds}
		_, err = cp.Clientset.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	dsStatus(3, 2)
	depStatus(2, 2)
	err = wait(300 * time.Millisecond)
	require.ErrorIs(t, err, kube.ErrRollout)
	require.ErrorContains(t, err, "DaemonSet "+ns+"/proxy: 3 of 3 updated, 2 of 3 available")
	require.NotContains(t, err.Error(), "Deployment", "the rolled-out Deployment is not named")

	// The wait returns as soon as the last pod becomes available.
	done := make(chan error, 1)
	go func() { done <- wait(30 * time.Second) }()
	dsStatus(3, 3)
	require.NoError(t, <-done)

	// A new generation is not rolled out until the controller saw it.
	_, err = c.Apply(ctx, addonManifests(ns, kubetest.UniqueName("proxier"), "v2"))
	require.NoError(t, err)
	require.ErrorContains(t, wait(300*time.Millisecond), "DaemonSet "+ns+"/proxy: generation 2 not yet observed (observed 1)")
	dsStatus(3, 3)
	require.NoError(t, wait(30*time.Second))

	// A Deployment past its progress deadline fails at once.
	depStatus(1, 2, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"})
	start := time.Now()
	err = wait(30 * time.Second)
	require.ErrorIs(t, err, kube.ErrRollout)
	require.ErrorContains(t, err, "Deployment "+ns+"/dns: 1 of 2 updated")
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second)
}
