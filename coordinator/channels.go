package coordinator

import (
	"context"
	"fmt"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// UpgradeStatus answers why a cluster is (not) upgrading, now, as the
// scheduler decides on this member's replica (SPEC §14).
func (c *Coordinator) UpgradeStatus(cluster string) (api.UpgradeStatus, error) {
	st, err := c.sm.UpgradeStatus(cluster, c.cfg.Clock.Now(), c.cfg.AutoUpgradeLimits)
	if err != nil {
		return api.UpgradeStatus{}, err
	}
	return convert.UpgradeStatusToAPI(cluster, st), nil
}

// Channels lists the catalog's release channels.
func (c *Coordinator) Channels() []api.Channel {
	var out []api.Channel
	for _, ch := range c.sm.Channels() {
		out = append(out, api.Channel{Name: ch.Name, DefaultVersion: ch.DefaultVersion.String(),
			AutoUpgradeTarget: ch.AutoUpgradeTarget.String(), UpdatedAt: ch.UpdatedAt})
	}
	return out
}

// Channel returns one release channel.
func (c *Coordinator) Channel(name string) (api.Channel, error) {
	for _, ch := range c.Channels() {
		if ch.Name == name {
			return ch, nil
		}
	}
	return api.Channel{}, &RuleError{Rule: statemachine.RuleUnknownChannel, Detail: fmt.Sprintf("channel %q is not one of rapid, regular, stable", name), Err: ErrNotFound}
}

// PutChannel sets a release channel's default version and auto-upgrade
// target; both must be in the catalog (empty unsets).
func (c *Coordinator) PutChannel(ctx context.Context, name string, u api.ChannelUpdate) error {
	cmd := statemachine.PutChannelCmd{Channel: name, Now: c.cfg.Clock.Now()}
	for _, f := range []struct {
		field string
		text  string
		v     *phases.Version
	}{{"defaultVersion", u.DefaultVersion, &cmd.DefaultVersion}, {"autoUpgradeTarget", u.AutoUpgradeTarget, &cmd.AutoUpgradeTarget}} {
		if f.text == "" {
			continue
		}
		v, err := phases.ParseVersion(f.text)
		if err != nil {
			return &RuleError{Rule: phases.RuleInvalid, Detail: f.field + ": " + err.Error(), Err: ErrInvalid}
		}
		*f.v = v
	}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	_, err := c.apply(ctx, cmd)
	return err
}
