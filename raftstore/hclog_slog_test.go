package raftstore

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// recordHandler keeps every record it is given.
type recordHandler struct {
	mu    sync.Mutex
	level slog.Level
	attrs []slog.Attr
	recs  *[]slog.Record
}

func (h *recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	*h.recs = append(*h.recs, r)
	return nil
}
func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordHandler{level: h.level, attrs: append(append([]slog.Attr(nil), h.attrs...), as...), recs: h.recs}
}
func (h *recordHandler) WithGroup(string) slog.Handler { return h }

func attrsOf(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

func TestHCLogBridgeLevels(t *testing.T) {
	tests := []struct {
		name    string
		log     func(hclog.Logger)
		handler slog.Level // the slog handler's minimum level
		want    slog.Level
		emitted bool
	}{
		{"trace below debug", func(l hclog.Logger) { l.Trace("m") }, slog.LevelDebug, 0, false},
		{"trace when asked", func(l hclog.Logger) { l.Trace("m") }, slog.LevelDebug - 4, slog.LevelDebug - 4, true},
		{"debug is debug", func(l hclog.Logger) { l.Debug("m") }, slog.LevelDebug, slog.LevelDebug, true},
		{"info is demoted to debug", func(l hclog.Logger) { l.Info("m") }, slog.LevelDebug, slog.LevelDebug, true},
		{"info hidden at info", func(l hclog.Logger) { l.Info("m") }, slog.LevelInfo, 0, false},
		{"warn stays warn", func(l hclog.Logger) { l.Warn("m") }, slog.LevelInfo, slog.LevelWarn, true},
		{"error stays error", func(l hclog.Logger) { l.Error("m") }, slog.LevelInfo, slog.LevelError, true},
		{"Log with level", func(l hclog.Logger) { l.Log(hclog.Error, "m") }, slog.LevelInfo, slog.LevelError, true},
		{"Off never logs", func(l hclog.Logger) { l.Log(hclog.Off, "m") }, slog.LevelDebug - 8, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recs []slog.Record
			l := newHCLogger(slog.New(&recordHandler{level: tt.handler, recs: &recs}), "raft")
			tt.log(l)
			if !tt.emitted {
				require.Empty(t, recs)
				return
			}
			require.Len(t, recs, 1)
			require.Equal(t, tt.want, recs[0].Level)
			require.Equal(t, "m", recs[0].Message)
		})
	}
}

func TestHCLogBridgeNamesArgsAndLevels(t *testing.T) {
	var recs []slog.Record
	l := newHCLogger(slog.New(&recordHandler{level: slog.LevelInfo, recs: &recs}), "raft")
	l.Named("transport").With("peer", "n1").Warn("dial failed", "err", "refused")
	require.Len(t, recs, 1)
	require.Equal(t, map[string]string{"logger": "raft.transport", "peer": "n1", "err": "refused"}, attrsOf(recs[0]))

	named := l.Named("x").ResetNamed("y")
	require.Equal(t, "y", named.Name())
	require.Equal(t, []any{"peer", "n1"}, l.With("peer", "n1").ImpliedArgs())

	require.False(t, l.IsDebug())
	require.False(t, l.IsInfo(), "raft's info is debug here")
	require.True(t, l.IsWarn())
	require.Equal(t, hclog.Warn, l.GetLevel())
	l.SetLevel(hclog.Trace) // no effect: slog decides
	require.Equal(t, hclog.Warn, l.GetLevel())

	std := l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error})
	std.Print("from std")
	require.Len(t, recs, 2)
	require.Equal(t, slog.LevelError, recs[1].Level)
	_, err := l.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Write([]byte("w\n"))
	require.NoError(t, err)
	require.Len(t, recs, 3)
}
