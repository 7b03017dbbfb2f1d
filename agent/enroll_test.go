package agent

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/trust"
)

// skewClock is the wall clock moved forward by an offset the test sets;
// After fires once the skewed time reaches its deadline, so advancing
// the offset fires pending timers at once. Timers still pending when the
// test ends stop then (newSkewClock), so their goroutines do not outlive
// it: the agent's renewal timer, hours away, never fires in a test.
type skewClock struct {
	mu     sync.Mutex
	offset time.Duration
	done   chan struct{}
}

// newSkewClock returns a skewClock whose pending timers stop when t ends.
func newSkewClock(t *testing.T) *skewClock {
	c := &skewClock{done: make(chan struct{})}
	t.Cleanup(func() { close(c.done) })
	return c
}

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *skewClock) Advance(d time.Duration) { c.mu.Lock(); c.offset += d; c.mu.Unlock() }

func (c *skewClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	deadline := c.Now().Add(d)
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-t.C:
			}
			if now := c.Now(); !now.Before(deadline) {
				ch <- now
				return
			}
		}
	}()
	return ch
}

// AfterFunc calls f when After would send; stop reports whether it came
// first.
func (c *skewClock) AfterFunc(d time.Duration, f func()) func() bool {
	ch := c.After(d)
	var state atomic.Int32 // 0 pending, 1 called, 2 stopped
	go func() {
		select {
		case <-ch:
			if state.CompareAndSwap(0, 1) {
				f()
			}
		case <-c.done:
		}
	}()
	return func() bool { return state.CompareAndSwap(0, 2) }
}

func storedLeaf(t *testing.T, h *fakeHost) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, "var/lib/molt-agent/tls", pairFileName))
	require.NoError(t, err)
	certPEM, _ := splitPEM(b)
	c, err := trust.ParseCert(certPEM)
	require.NoError(t, err)
	return c
}

func serialName(c *x509.Certificate) string {
	return fmt.Sprintf("%s %s", c.Subject.CommonName, hex.EncodeToString(c.SerialNumber.Bytes()))
}

// An agent with a bootstrap token and the pin enrolls: its key stays on the
// host (0600, beside the certificate), every later request presents the
// certificate naming its node, and a restart needs no token.
func TestEnrollThenEveryRequestUsesTheCertificate(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	stop, _ := runAgent(t, h.cfg)
	require.Eventually(t, func() bool { return coord.Registered() >= 1 && len(coord.Heartbeats()) > 0 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, coord.Enrolled())
	dir := filepath.Join(h.root, "var/lib/molt-agent/tls")
	st, err := os.Stat(filepath.Join(dir, pairFileName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the key never leaves the host and is the owner's alone")
	require.FileExists(t, filepath.Join(dir, caFileName))
	require.NoFileExists(t, filepath.Join(dir, pendingFileName))
	leaf := storedLeaf(t, h)
	for _, c := range coord.Clients() {
		require.Equal(t, serialName(leaf), c, "every agent request presents the enrolled certificate")
	}
	require.Contains(t, coord.Clients()[0], "agent:c1/n1 ")
	require.NoError(t, stop())

	// Restarted without a token: the stored certificate is enough.
	h.cfg.BootstrapToken = ""
	stop, _ = runAgent(t, h.cfg)
	n := coord.Registered()
	require.Eventually(t, func() bool { return coord.Registered() > n }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, coord.Enrolled(), "no second enrollment")
	require.NoError(t, stop())
}

// A coordinator whose CA does not match the pin gets nothing: the agent
// refuses it in the handshake, before the token or a CSR is sent.
func TestWrongPinSendsNothing(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	other, err := trust.NewCA("other", time.Now())
	require.NoError(t, err)
	h.cfg.CAPin = other.Pin()
	a, err := New(h.cfg)
	require.NoError(t, err)
	defer a.Close()
	err = a.enrollOnce(context.Background())
	require.ErrorContains(t, err, "does not match the CA pin")
	require.Equal(t, 0, coord.Enrolled())
	require.NoFileExists(t, filepath.Join(h.root, "var/lib/molt-agent/tls", pairFileName))
}

// Without a valid certificate and without a token and pin the agent stops
// with a clear error instead of retrying forever.
func TestNoCredentialsIsAConfigError(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	h.cfg.BootstrapToken, h.cfg.CAPin = "", ""
	a, err := New(h.cfg)
	require.NoError(t, err)
	defer a.Close()
	err = a.Run(context.Background())
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "no bootstrap token and CA pin")

	h.cfg.BootstrapToken = "not-a-token"
	_, err = New(h.cfg)
	require.ErrorIs(t, err, ErrConfig)
}

// At two thirds of its lifetime (injected clock) the agent renews its
// certificate with a new key; new connections present the new one. Once
// a stored certificate has expired, a restart without a token is a clear
// error.
func TestRotationAtTwoThirds(t *testing.T) {
	coord := newFakeCoordinator(t)
	coord.CertLifetime = time.Hour
	h := newFakeHost(t, coord)
	clock := newSkewClock(t)
	h.cfg.Clock = clock
	coord.SetClock(clock.Now)
	stop, _ := runAgent(t, h.cfg)
	require.Eventually(t, func() bool { return coord.Registered() >= 1 }, 10*time.Second, 10*time.Millisecond)
	first := storedLeaf(t, h)

	clock.Advance(35 * time.Minute) // before 2/3 of an hour
	n := len(coord.Clients())
	require.Eventually(t, func() bool { return len(coord.Clients()) > n+3 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 0, coord.Renewed(), "not before two thirds of the lifetime")

	clock.Advance(6 * time.Minute) // past 40 minutes
	require.Eventually(t, func() bool { return coord.Renewed() == 1 }, 10*time.Second, 10*time.Millisecond)
	// The coordinator counts the renewal when it answers; the agent
	// stores the new pair after it reads the answer.
	var second *x509.Certificate
	require.Eventually(t, func() bool {
		second = storedLeaf(t, h)
		return second.SerialNumber.Cmp(first.SerialNumber) != 0
	}, 10*time.Second, 10*time.Millisecond, "the renewed certificate is stored")
	require.NotEqual(t, first.PublicKey, second.PublicKey, "a new key with each certificate")
	// Connections opened before the renewal may go on with the old
	// certificate (the coordinator accepts a node's two newest); new ones
	// present the new one.
	coord.CloseClientConnections()
	require.Eventually(t, func() bool {
		cs := coord.Clients()
		return cs[len(cs)-1] == serialName(second)
	}, 10*time.Second, 10*time.Millisecond, "the next requests present the renewed certificate")
	require.NoError(t, stop())

	// Expired and no token: nothing to enroll with.
	h.cfg.BootstrapToken = ""
	clock.Advance(2 * time.Hour)
	a, err := New(h.cfg)
	require.NoError(t, err)
	defer a.Close()
	err = a.Run(context.Background())
	require.ErrorIs(t, err, ErrConfig)
	require.True(t, strings.Contains(err.Error(), "no valid certificate"), err)
}

// The registration after an enrollment asks for the enrollment's state
// index: a member whose replica trails it catches up before judging the
// new certificate, instead of refusing it as not current (a fleet
// enrolling at once met that refusal at lagging followers).
func TestRegistrationAsksForTheEnrollmentsIndex(t *testing.T) {
	coord := newFakeCoordinator(t)
	coord.EnrollIndex = 4242
	h := newFakeHost(t, coord)
	stop, _ := runAgent(t, h.cfg)
	require.Eventually(t, func() bool { return coord.Registered() >= 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, stop())
	require.Equal(t, 1, coord.Enrolled())
	require.Equal(t, "4242", coord.RegisterMinIndex()[0], "the registration names the index the enrollment answered with")
}
