package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/raftstore"
)

// dispatcher holds, on the leader only, the operations each node's agent
// should run now. It is rebuilt from the replicated state on every tick, so
// a new leader offers exactly what the old one did, under the same IDs.
// It serves only during a leadership term (serve … stop): outside one,
// polls return errNotServing at once, so that agents go to the leader.
type dispatcher struct {
	mu      sync.Mutex
	serving bool                                  // a leadership term runs
	term    uint64                                // counts serve calls
	offers  map[string]map[string][]api.Operation // cluster → node → ops
	waiters map[string]chan struct{}              // cluster/node → closed on change
}

// errNotServing is what poll returns outside a leadership term.
var errNotServing = fmt.Errorf("%w: no leadership term served here", raftstore.ErrNotLeader)

func newDispatcher() *dispatcher {
	return &dispatcher{offers: map[string]map[string][]api.Operation{}, waiters: map[string]chan struct{}{}}
}

func nodeKey(cluster, node string) string { return cluster + "/" + node }

// serve starts serving polls (a leadership term begins) with no offers;
// the term's first tick fills them.
func (d *dispatcher) serve() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serving = true
	d.term++
	d.offers = map[string]map[string][]api.Operation{}
}

// stop ends serving (leadership lost or the member closes): every offer
// is dropped and every waiting poll returns errNotServing at once.
func (d *dispatcher) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serving = false
	d.offers = map[string]map[string][]api.Operation{}
	for k, ch := range d.waiters {
		close(ch)
		delete(d.waiters, k)
	}
}

// setCluster replaces a cluster's offers and wakes the pollers of every node
// whose offer changed. Outside a term (a tick finishing after stop) it does
// nothing.
func (d *dispatcher) setCluster(cluster string, byNode map[string][]api.Operation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.serving {
		return
	}
	old := d.offers[cluster]
	for node := range mergeKeys(old, byNode) {
		if !sameOps(old[node], byNode[node]) {
			d.notify(nodeKey(cluster, node))
		}
	}
	if len(byNode) == 0 {
		delete(d.offers, cluster)
		return
	}
	d.offers[cluster] = byNode
}

func (d *dispatcher) notify(key string) {
	if ch, ok := d.waiters[key]; ok {
		close(ch)
		delete(d.waiters, key)
	}
}

// poll returns the node's offered operations, waiting up to wait for some.
// It returns errNotServing at once when no term is being served, or when
// the term it started in ends while it waits.
func (d *dispatcher) poll(ctx context.Context, cluster, node string, wait time.Duration) ([]api.Operation, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	d.mu.Lock()
	term := d.term
	d.mu.Unlock()
	for {
		d.mu.Lock()
		if !d.serving || d.term != term {
			d.mu.Unlock()
			return nil, errNotServing
		}
		ops := slices.Clone(d.offers[cluster][node])
		if len(ops) > 0 || wait <= 0 {
			d.mu.Unlock()
			return ops, nil
		}
		key := nodeKey(cluster, node)
		ch, ok := d.waiters[key]
		if !ok {
			ch = make(chan struct{})
			d.waiters[key] = ch
		}
		d.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

func mergeKeys(a, b map[string][]api.Operation) map[string]bool {
	m := map[string]bool{}
	for k := range maps.Keys(a) {
		m[k] = true
	}
	for k := range maps.Keys(b) {
		m[k] = true
	}
	return m
}

func sameOps(a, b []api.Operation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}
