package coordinator

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
)

// dispatcher holds, on the leader only, the operations each node's agent
// should run now. It is rebuilt from the replicated state on every tick, so
// a new leader offers exactly what the old one did, under the same IDs.
type dispatcher struct {
	mu      sync.Mutex
	offers  map[string]map[string][]api.Operation // cluster → node → ops
	waiters map[string]chan struct{}              // cluster/node → closed on change
}

func newDispatcher() *dispatcher {
	return &dispatcher{offers: map[string]map[string][]api.Operation{}, waiters: map[string]chan struct{}{}}
}

func nodeKey(cluster, node string) string { return cluster + "/" + node }

// setCluster replaces a cluster's offers and wakes the pollers of every node
// whose offer changed.
func (d *dispatcher) setCluster(cluster string, byNode map[string][]api.Operation) {
	d.mu.Lock()
	defer d.mu.Unlock()
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

// clear drops every offer (leadership lost) and wakes all pollers, which
// then learn this member no longer leads.
func (d *dispatcher) clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.offers = map[string]map[string][]api.Operation{}
	for k, ch := range d.waiters {
		close(ch)
		delete(d.waiters, k)
	}
}

// poll returns the node's offered operations, waiting up to wait for some.
func (d *dispatcher) poll(ctx context.Context, cluster, node string, wait time.Duration) []api.Operation {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		ops := slices.Clone(d.offers[cluster][node])
		if len(ops) > 0 || wait <= 0 {
			d.mu.Unlock()
			return ops
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
			return nil
		case <-ctx.Done():
			return nil
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
