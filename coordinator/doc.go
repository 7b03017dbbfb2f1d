// Package coordinator is molt's brain: the replicated state of every
// cluster, release and upgrade (an FSM plugged into raftstore), the leader
// loop that calls the pure engine (phases) on every tick and commits its
// decisions before acting on them, the work runners that act on clusters
// and hand typed operations to agents, and agent liveness.
//
// See DESIGN.md for how a decision travels from Decide to the Raft log to a
// host, and why a leader change neither loses nor repeats a step.
package coordinator
