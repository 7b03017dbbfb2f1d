package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/moltproject/molt/cloud"
)

// waitInstances polls a group until done says its instances are where the
// step needs them, or the instance timeout passes. done returns a wait
// reason when the provider reports a condition that passes (stockout,
// quota), which ends the wait.
func (l *leader) waitInstances(ctx context.Context, prov cloud.Provider, g cloud.GroupRef, what string,
	done func([]cloud.Instance) (ok bool, wait string, err error)) (string, error) {
	deadline := time.Now().Add(l.cfg.InstanceTimeout)
	for {
		insts, err := prov.ListInstances(ctx, g)
		if err == nil {
			ok, wait, derr := done(insts)
			if ok || wait != "" || derr != nil {
				return wait, derr
			}
		} else if !cloud.Retryable(err) {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s: not done after %s", what, l.cfg.InstanceTimeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(l.cfg.InstancePoll):
		}
	}
}

func findInstance(insts []cloud.Instance, name string) (cloud.Instance, bool) {
	i := slices.IndexFunc(insts, func(in cloud.Instance) bool { return in.Name == name })
	if i < 0 {
		return cloud.Instance{}, false
	}
	return insts[i], true
}

// waitReason turns a quota or capacity error into the reason a step
// waits with; other errors stay errors.
func waitReason(g cloud.GroupRef, err error) string {
	switch {
	case errors.Is(err, cloud.ErrQuota):
		return fmt.Sprintf("quota: no instance quota left for %s: %v", g, err)
	case errors.Is(err, cloud.ErrStockout):
		return fmt.Sprintf("stockout: no capacity in zone %s: %v", g.Zone, err)
	}
	return ""
}
