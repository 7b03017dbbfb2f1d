package systemd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Ready tells systemd the service finished starting (READY=1). For a
// Type=notify unit, systemctl start returns and the unit becomes active
// only now. Outside systemd (no NOTIFY_SOCKET) it does nothing.
func Ready() error {
	_, err := daemon.SdNotify(false, daemon.SdNotifyReady)
	if err != nil {
		return fmt.Errorf("systemd: notify ready: %w", err)
	}
	return nil
}

// Status sets the free-form status line systemctl status shows.
func Status(s string) error {
	_, err := daemon.SdNotify(false, "STATUS="+s)
	if err != nil {
		return fmt.Errorf("systemd: notify status: %w", err)
	}
	return nil
}

// Stopping tells systemd the service is shutting down (STOPPING=1).
func Stopping() error {
	_, err := daemon.SdNotify(false, daemon.SdNotifyStopping)
	return err
}

// WatchdogInterval is the unit's WatchdogSec for this process, 0 when
// the watchdog is not enabled (or not under systemd).
func WatchdogInterval() time.Duration {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0
	}
	return d
}

// Watchdog pings systemd's watchdog (WATCHDOG=1) at half of WatchdogSec
// until ctx ends, so a hung process is killed and restarted by systemd.
// healthy, when non-nil, is consulted before each ping: a false answer
// skips the ping, letting systemd act. molt's daemons pass a function that
// is true only while their loops make progress (docs/agent.md,
// "Watchdog"), so a process whose loops are wedged is restarted even
// though this goroutine still runs. It returns at once when the watchdog
// is not enabled for this process.
func Watchdog(ctx context.Context, log *slog.Logger, healthy func() bool) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval == 0 {
		if err != nil {
			log.Warn("watchdog setting unreadable", "err", err)
		}
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		if healthy == nil || healthy() {
			if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
				log.Warn("watchdog ping failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
