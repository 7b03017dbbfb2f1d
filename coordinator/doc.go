// Package coordinator is molt's brain around its replicated state: it
// plugs the state machine (package statemachine: state, commands, apply
// functions, snapshots) into raftstore and holds the I/O; it reads the
// state only through statemachine's typed queries.
//
// A member has two sides with their own types. The request service is
// the exported methods of Coordinator, which package httpapi calls
// through small interfaces of its own: they validate a request, propose
// it through Raft and read the replica (service.go, preflight.go,
// maintenance.go, channels.go, members.go, trust.go, secrets.go,
// audit.go, and agents' calls in liveness.go and operations.go). The
// leader runtime is leader, one per leadership term (leader.go): the
// leader loop that calls the pure engine (phases) on every tick and
// commits its decisions before acting on them (tick.go), the work
// runners that act on clusters and cloud groups and hand typed
// operations to agents (work.go, migwork.go, cloudwait.go, gates.go,
// preflightwork.go), and the scheduler of automatic upgrades
// (scheduler.go). Both share what outlives a term: the replica and
// store, the dispatcher of agents' polls, agent liveness and the cluster
// connections.
//
// See DESIGN.md for how a decision travels from Decide to the Raft log to a
// host, and why a leader change neither loses nor repeats a step.
package coordinator
