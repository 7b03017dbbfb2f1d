package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/moltproject/molt/etcdgate"
)

// EtcdSampler samples the host's etcd cluster for the etcd gate: every
// member in the member list with what its own status says.
type EtcdSampler interface {
	SampleEtcd(ctx context.Context) (etcdgate.Sample, error)
	Close() error
}

// etcdGateInterval is the time between two samples of the etcd gate. The
// raft rule compares consecutive samples, so this is also the shortest
// time the gate holds.
const etcdGateInterval = time.Second

// openEtcd connects to the host's etcd cluster (ErrNoEtcd on a host
// without credentials). Opened before the local member restarts, the
// client knows every member's URL and keeps sampling through the others
// while the local one is down.
func (a *Agent) openEtcd(ctx context.Context) (EtcdSampler, error) {
	if a.cfg.OpenEtcd != nil {
		return a.cfg.OpenEtcd(ctx)
	}
	cfg, err := a.etcdConfig(ctx)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return &etcdClient{cli: cli, now: a.clock.Now}, nil
}

type etcdClient struct {
	cli *clientv3.Client
	now func() time.Time
}

func (c *etcdClient) Close() error { return c.cli.Close() }

// SampleEtcd lists the members and asks each, at its own client URL, for
// its status; a member that does not answer is in the sample with why.
func (c *etcdClient) SampleEtcd(ctx context.Context) (etcdgate.Sample, error) {
	lctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
	defer cancel()
	list, err := c.cli.MemberList(lctx)
	if err != nil {
		return etcdgate.Sample{}, fmt.Errorf("member list: %w", err)
	}
	s := etcdgate.Sample{Time: c.now()}
	for _, m := range list.Members {
		mem := etcdgate.Member{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner}
		if len(m.ClientURLs) == 0 {
			mem.Err = "no client URL"
		} else {
			sctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
			st, err := c.cli.Status(sctx, m.ClientURLs[0])
			cancel()
			if err != nil {
				mem.Err = err.Error()
			} else {
				mem.Leader, mem.RaftIndex, mem.AppliedIndex = st.Leader, st.RaftIndex, st.RaftAppliedIndex
				mem.Alarms, mem.Version = st.Errors, st.Version
			}
		}
		s.Members = append(s.Members, mem)
	}
	return s, nil
}

// etcdGate samples the cluster until the gate passes or timeout, and says
// how long and why it held. want is the member count before the node's
// upgrade.
func (a *Agent) etcdGate(ctx context.Context, es EtcdSampler, want int, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := etcdgate.Watch{Want: want}
	for {
		s, err := es.SampleEtcd(ctx)
		var d etcdgate.Decision
		if err != nil {
			d = w.Unreachable(a.clock.Now(), err)
		} else {
			d = w.Observe(s)
		}
		if d.Pass {
			a.log.Info("etcd gate passed", "summary", w.Summary(), "cluster", d.Reason)
			return w.Summary() + "; " + d.Reason, nil
		}
		a.log.Debug("etcd gate holds", "reason", d.Reason)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return w.Summary(), fmt.Errorf("etcd gate after %s: %s", timeout.Round(time.Second), d.Reason)
			}
			return w.Summary(), ctx.Err()
		case <-a.clock.After(etcdGateInterval):
		}
	}
}
