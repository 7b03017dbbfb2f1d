// Package coordinator is molt's brain around its replicated state: it
// plugs the state machine (package statemachine: state, commands, apply
// functions, snapshots) into raftstore, runs the leader loop that calls the
// pure engine (phases) on every tick and commits its decisions before
// acting on them, the work runners that act on clusters and hand typed
// operations to agents, and agent liveness. It holds the I/O; it reads the
// state only through statemachine's typed queries.
//
// See DESIGN.md for how a decision travels from Decide to the Raft log to a
// host, and why a leader change neither loses nor repeats a step.
package coordinator
