package raftstore

import "sync"

// leaderFanout delivers leadership changes to any number of subscribers.
// Raft's own LeaderCh keeps one channel and drops values nobody reads; here
// each subscriber has a one-slot channel that always holds the newest value,
// so a slow reader misses intermediate flips but never reads a stale state
// and never blocks Raft.
type leaderFanout struct {
	mu     sync.Mutex
	leader bool
	subs   []chan bool
	closed bool
}

// subscribe returns a channel that first receives the current state, then
// each change. It is closed when the store closes.
func (f *leaderFanout) subscribe() <-chan bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan bool, 1)
	if f.closed {
		close(ch)
		return ch
	}
	ch <- f.leader
	f.subs = append(f.subs, ch)
	return ch
}

// publish records v and offers it to every subscriber, replacing a value the
// subscriber has not read yet. Only publish sends, under mu, so after
// draining a slot the send cannot block.
func (f *leaderFanout) publish(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.leader = v
	for _, ch := range f.subs {
		select {
		case ch <- v:
		default:
			select {
			case <-ch:
			default:
			}
			ch <- v
		}
	}
}

// close closes every subscriber channel; later subscribers get a closed one.
func (f *leaderFanout) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for _, ch := range f.subs {
		close(ch)
	}
	f.subs = nil
}
