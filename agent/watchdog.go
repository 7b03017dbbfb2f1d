package agent

import (
	"context"
	"strings"
	"time"
)

// The agent's loops whose progress Healthy judges (docs/agent.md,
// "Watchdog"). The certificate rotation goroutine is not among them: it
// sleeps until the renewal is due, hours at a time, so it has no bound to
// miss.
const (
	// LoopMain enrolls, registers, long-polls for operations, executes
	// them and reports their results. While it executes an operation it
	// is busy: an operation's steps carry deadlines of their own
	// (HealthTimeout, StaticPodTimeout, DownloadTimeout, ...) and pulling
	// images may take minutes, so it is judged again from its next
	// iteration.
	LoopMain = "main"
	// LoopHeartbeat samples the host's health and sends heartbeats. It
	// runs beside operations, so it keeps making progress while one runs.
	LoopHeartbeat = "heartbeat"
)

// requestTimeout bounds one heartbeat, registration, enrollment or result
// report. Each is retried after a failure, so the deadline only turns a
// request that hangs (a member that holds it without answering) into a
// retry, and gives the loop making it a bound.
const requestTimeout = 30 * time.Second

// heartbeatBound is the longest one iteration of the heartbeat loop may
// take: its wait (at most HealthCheckInterval), the health probes (the
// kubelet's version then its healthz, each at most probeTimeout, beside
// the others) and the heartbeat request.
func (a *Agent) heartbeatBound() time.Duration {
	return max(a.cfg.HealthCheckInterval, 0) + 2*probeTimeout + requestTimeout
}

// mainBound is the longest one iteration of the main loop may take
// outside an operation: a long poll (or another request) and a backoff.
func (a *Agent) mainBound() time.Duration {
	return max(a.pollTimeout(), requestTimeout) + a.cfg.RetryMax
}

// pollTimeout bounds one long poll: the wait asked for and room for the
// answer.
func (a *Agent) pollTimeout() time.Duration { return a.cfg.PollWait + 10*time.Second }

// Healthy reports whether every loop of a running agent makes progress:
// none went without progress for longer than its bound plus
// WatchdogSlack. molt-agent pings systemd's watchdog only while it is
// true, so systemd restarts an agent whose loop is wedged. A stalled loop
// is logged each time Healthy finds it.
func (a *Agent) Healthy() bool {
	stalled := a.loops.Stalled()
	if len(stalled) > 0 {
		a.log.Error("agent loop made no progress within its bound; the watchdog is not pinged", "loops", strings.Join(stalled, ","))
		return false
	}
	return true
}

// loopTop is called at the top of each iteration of loop: it records
// progress and calls the fault hook.
func (a *Agent) loopTop(ctx context.Context, loop string) {
	if a.cfg.LoopHook != nil {
		a.cfg.LoopHook(ctx, loop)
	}
	a.loops.Beat(loop)
}

// withRequestTimeout bounds one request by requestTimeout.
func withRequestTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}
