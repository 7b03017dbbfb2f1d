package systemd

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Sentinel errors of unit control.
var (
	// ErrJobFailed means systemd finished a start/stop/restart job with a
	// result other than "done" (failed, timeout, dependency, ...).
	ErrJobFailed = errors.New("systemd job failed")
	// ErrNotActive means a unit did not become active before the deadline.
	ErrNotActive = errors.New("unit not active")
)

// UnitState is a unit's ActiveState and SubState, e.g. active/running.
type UnitState struct {
	Active string
	Sub    string
}

// Units controls systemd units over D-Bus. It is safe for concurrent use.
type Units struct {
	conn *sdbus.Conn
}

// Connect opens a D-Bus connection to systemd. An empty busAddress uses
// the system bus (falling back to systemd's private socket for root);
// otherwise busAddress is a D-Bus address such as
// "unix:path=/proc/1234/root/run/dbus/system_bus_socket", which reaches
// the systemd of a container from outside.
func Connect(ctx context.Context, busAddress string) (*Units, error) {
	var (
		c   *sdbus.Conn
		err error
	)
	if busAddress == "" {
		c, err = sdbus.NewWithContext(ctx)
	} else {
		c, err = sdbus.NewConnection(func() (*dbus.Conn, error) {
			conn, err := dbus.Dial(busAddress, dbus.WithContext(ctx))
			if err != nil {
				return nil, err
			}
			if err := conn.Auth(nil); err != nil {
				conn.Close()
				return nil, err
			}
			if err := conn.Hello(); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("systemd: connect D-Bus: %w", err)
	}
	return &Units{conn: c}, nil
}

// Close closes the D-Bus connection.
func (u *Units) Close() { u.conn.Close() }

// RestartUnit restarts name (starting it if stopped) and waits for the job
// to finish. A finished job is not proof of health: for Type=notify units
// it means READY was sent; callers that need more check health themselves.
func (u *Units) RestartUnit(ctx context.Context, name string) error {
	return u.job(ctx, "restart", name, u.conn.RestartUnitContext)
}

// QueueRestart asks systemd to restart name and returns once the job is
// queued, without waiting for it: how a unit's own process restarts
// itself (systemd stops the caller before the job finishes).
func (u *Units) QueueRestart(ctx context.Context, name string) error {
	if _, err := u.conn.RestartUnitContext(ctx, name, "replace", nil); err != nil {
		return fmt.Errorf("systemd: restart %s: %w", name, err)
	}
	return nil
}

// StartUnit starts name and waits for the job to finish.
func (u *Units) StartUnit(ctx context.Context, name string) error {
	return u.job(ctx, "start", name, u.conn.StartUnitContext)
}

// StopUnit stops name and waits for the job to finish.
func (u *Units) StopUnit(ctx context.Context, name string) error {
	return u.job(ctx, "stop", name, u.conn.StopUnitContext)
}

type jobFunc func(ctx context.Context, name, mode string, ch chan<- string) (int, error)

func (u *Units) job(ctx context.Context, verb, name string, f jobFunc) error {
	ch := make(chan string, 1)
	// "replace" lets a restart supersede a queued start/stop of the same
	// unit, which is what an operator running systemctl would get.
	if _, err := f(ctx, name, "replace", ch); err != nil {
		return fmt.Errorf("systemd: %s %s: %w", verb, name, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("%w: %s %s: %s", ErrJobFailed, verb, name, res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("systemd: %s %s: %w", verb, name, ctx.Err())
	}
}

// UnitState returns the unit's ActiveState and SubState.
func (u *Units) UnitState(ctx context.Context, name string) (UnitState, error) {
	props, err := u.conn.GetUnitPropertiesContext(ctx, name)
	if err != nil {
		return UnitState{}, fmt.Errorf("systemd: state of %s: %w", name, err)
	}
	a, _ := props["ActiveState"].(string)
	s, _ := props["SubState"].(string)
	return UnitState{Active: a, Sub: s}, nil
}

// WaitActive polls until the unit is active or ctx ends.
func (u *Units) WaitActive(ctx context.Context, name string) error {
	var last UnitState
	for {
		st, err := u.UnitState(ctx, name)
		if err == nil && st.Active == "active" {
			return nil
		}
		last = st
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s is %s/%s: %w", ErrNotActive, name, last.Active, last.Sub, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
