package raftstore

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogSlog is an hclog.Logger that writes to a *slog.Logger, so that Raft's
// own logging lands in the same structured stream as molt's. Raft is chatty
// about normal operation (elections, snapshots, pipelining), so everything up
// to Info is sent at slog Debug, and Trace one step below that; warnings and
// errors keep their level because they are what an operator must see.
type hclogSlog struct {
	base    *slog.Logger // without name or implied args
	name    string
	implied []any
	eff     *slog.Logger // base + name + implied, what Log writes to
}

// newHCLogger returns an hclog.Logger named name that writes to l.
func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return newHCLogSlog(l, name, nil)
}

func newHCLogSlog(base *slog.Logger, name string, implied []any) *hclogSlog {
	eff := base
	if name != "" {
		eff = eff.With("logger", name)
	}
	if len(implied) > 0 {
		eff = eff.With(implied...)
	}
	return &hclogSlog{base: base, name: name, implied: implied, eff: eff}
}

// slogLevel maps hclog levels onto slog levels (see the type comment).
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default: // NoLevel, Debug, Info
		return slog.LevelDebug
	}
}

func (h *hclogSlog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	sl := slogLevel(level)
	ctx := context.Background()
	if !h.eff.Enabled(ctx, sl) {
		return
	}
	h.eff.Log(ctx, sl, msg, args...)
}

func (h *hclogSlog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogSlog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogSlog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogSlog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogSlog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogSlog) enabled(l hclog.Level) bool {
	return h.eff.Enabled(context.Background(), slogLevel(l))
}

func (h *hclogSlog) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogSlog) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogSlog) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogSlog) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogSlog) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogSlog) ImpliedArgs() []any { return h.implied }

func (h *hclogSlog) With(args ...any) hclog.Logger {
	implied := append(append([]any(nil), h.implied...), args...)
	return newHCLogSlog(h.base, h.name, implied)
}

func (h *hclogSlog) Name() string { return h.name }

func (h *hclogSlog) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return newHCLogSlog(h.base, name, h.implied)
}

func (h *hclogSlog) ResetNamed(name string) hclog.Logger {
	return newHCLogSlog(h.base, name, h.implied)
}

// SetLevel does nothing: the level is the slog handler's to decide.
func (h *hclogSlog) SetLevel(hclog.Level) {}

// GetLevel reports the lowest hclog level the slog handler lets through.
func (h *hclogSlog) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Warn, hclog.Error} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (h *hclogSlog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return slog.NewLogLogger(h.eff.Handler(), slogLevel(level))
}

func (h *hclogSlog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(opts).Writer()
}

var _ hclog.Logger = (*hclogSlog)(nil)
