// Package testlog gives tests a *slog.Logger that writes to t.Log.
//
// Background goroutines (Raft's transport, HTTP servers) may log after a
// test returned, when t.Log would panic; the writer drops such late lines.
// MOLT_TEST_DEBUG=1 logs at Debug; MOLT_TEST_LOG_STDERR=1 writes to stderr
// instead, so logs survive a test timeout.
package testlog

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

type writer struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// New returns a logger writing to t.Log at Info until the test ends.
func New(t testing.TB) *slog.Logger {
	w := &writer{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	level := slog.LevelInfo
	if os.Getenv("MOLT_TEST_DEBUG") != "" || os.Getenv("RAFTSTORE_DEBUG") != "" {
		level = slog.LevelDebug
	}
	var out io.Writer = w
	if os.Getenv("MOLT_TEST_LOG_STDERR") != "" || os.Getenv("RAFTSTORE_LOG_STDERR") != "" {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: level}))
}
