package coordinator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/phases"
)

// WaitServing records the wait for an LB node's static pods: the fake's
// pods are always Ready.
func (f *fakeOps) WaitServing(ctx context.Context, node string) error {
	return f.gate(ctx, "serving "+node)
}

// TestLBNodeDoneOnlyWhenItServes: a control-plane LB node whose kubelet is
// back (Ready at the version) is not done while the LB it runs is not
// serving yet, and the control plane does not start; once it serves, the
// upgrade goes on. Only LB pools' nodes are asked.
func TestLBNodeDoneOnlyWhenItServes(t *testing.T) {
	ops := newFakeOps()
	hit, release := ops.holdCall("serving cplb-1")
	defer release()
	cl := upgradeLab(t, newTestCluster(t, 1, ops))
	ctx := t.Context()
	select {
	case <-hit:
	case <-time.After(waitTimeout):
		t.Fatal("cplb-1's LB was never waited for")
	}
	u, err := getUpgrade(ctx, cl, "lab")
	require.NoError(t, err)
	n, _ := u.Node("cplb-1")
	st, _ := u.CurrentStep(n)
	require.Equal(t, phases.StateRunning, n.State)
	require.Equal(t, phases.NodeWaitReady, st.Kind, "cplb-1 waits at waitReady while its LB does not serve")
	require.False(t, ops.called("cordon cp-1"), "the control plane started before its LB served")

	release()
	u = waitLabUpgrade(t, cl, "upgrade done", func(u *phases.Upgrade) bool { return !u.InProgress() })
	require.Equal(t, phases.UpgradeDone, u.State, u.Reason)
	var serving []string
	for _, c := range ops.Calls() {
		if strings.HasPrefix(c, "serving ") {
			serving = append(serving, strings.TrimPrefix(c, "serving "))
		}
	}
	require.ElementsMatch(t, []string{"cplb-1", "lb-1"}, serving, "only LB pools' nodes are asked whether they serve")
}
