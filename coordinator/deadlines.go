package coordinator

import (
	"container/heap"
	"time"
)

// deadline is one agent's place in deadlines: its last beat, or the
// term's start if later.
type deadline struct {
	cluster, node string
	last          time.Time
	index         int // in deadlinesHeap
}

// deadlines is a min-heap of agents by last beat with an index by agent,
// so that a beat moves its agent in O(log n) and a tick finds the agents
// overdue without looking at the others.
type deadlines struct {
	byKey map[[2]string]*deadline
	h     deadlinesHeap
}

func newDeadlines() deadlines { return deadlines{byKey: map[[2]string]*deadline{}} }

func (d *deadlines) len() int { return len(d.h) }

func (d *deadlines) has(cluster, node string) bool {
	_, ok := d.byKey[[2]string{cluster, node}]
	return ok
}

// set places agent (cluster, node) at last, adding it if absent.
func (d *deadlines) set(cluster, node string, last time.Time) {
	k := [2]string{cluster, node}
	if e, ok := d.byKey[k]; ok {
		if !e.last.Equal(last) {
			e.last = last
			heap.Fix(&d.h, e.index)
		}
		return
	}
	e := &deadline{cluster: cluster, node: node, last: last}
	d.byKey[k] = e
	heap.Push(&d.h, e)
}

// first returns the agent with the oldest last beat.
func (d *deadlines) first() (deadline, bool) {
	if len(d.h) == 0 {
		return deadline{}, false
	}
	return *d.h[0], true
}

func (d *deadlines) remove(cluster, node string) {
	k := [2]string{cluster, node}
	if e, ok := d.byKey[k]; ok {
		heap.Remove(&d.h, e.index)
		delete(d.byKey, k)
	}
}

// deadlinesHeap implements heap.Interface, oldest last beat first.
type deadlinesHeap []*deadline

func (h deadlinesHeap) Len() int           { return len(h) }
func (h deadlinesHeap) Less(i, j int) bool { return h[i].last.Before(h[j].last) }
func (h deadlinesHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *deadlinesHeap) Push(x any) {
	e := x.(*deadline)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *deadlinesHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
