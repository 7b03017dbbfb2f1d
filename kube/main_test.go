package kube_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// All tests in this package share one real control plane.
func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }

// t0 is an arbitrary fixed start of fake time, whole seconds because pod
// timestamps are stored with second precision.
var t0 = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

// testConfig is DefaultConfig on a fake clock at now, logging to t.Log.
func testConfig(t *testing.T, now time.Time) (kube.Config, *clocktesting.FakeClock) {
	fc := clocktesting.NewFakeClock(now)
	cfg := kube.DefaultConfig()
	cfg.Clock = fc
	cfg.PollInterval = 30 * time.Second
	cfg.EvictionBackoff = time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return cfg, fc
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// withClock runs fn while stepping fc by step whenever fn is blocked on the
// fake clock, so "20 minutes" of drain pass in as many API round trips as
// the drain makes. It polls (1 ms) with a real deadline.
func withClock[T any](t *testing.T, fc *clocktesting.FakeClock, step time.Duration, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case v := <-done:
			return v
		case <-tick.C:
		}
		require.False(t, time.Now().After(deadline), "function did not return within the real-time deadline")
		if fc.HasWaiters() {
			fc.Step(step)
		}
	}
}

type drainOut struct {
	res kube.DrainResult
	err error
}

// drain runs c.Drain on the fake clock to completion.
func drain(t *testing.T, c *kube.Client, fc *clocktesting.FakeClock, step time.Duration, node string, opts kube.DrainOptions) (kube.DrainResult, error) {
	t.Helper()
	out := withClock(t, fc, step, func() drainOut {
		res, err := c.Drain(context.Background(), node, opts)
		return drainOut{res, err}
	})
	return out.res, out.err
}

// eventually polls cond every 10 ms for up to 30 s of real time.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 10*time.Millisecond, msg)
}
