// Package linearizability checks the coordinator's API against its
// documented read semantics with porcupine, under faults.
//
// Its one test (build tag linearizability, `make test-linearizability`)
// starts three molt-coordinator processes, each in a network namespace of
// its own joined by a bridge (10.78.0.0/24, namespaces prefixed moltp-),
// and lets concurrent clients write and read releases — each release
// version one register — while a seeded schedule kills members (SIGKILL,
// then restart on the same data directory), freezes them (SIGSTOP, then
// SIGCONT) and partitions them from their peers with nftables. The history
// of every client's calls is then checked for linearizability per release
// with github.com/anishathalye/porcupine.
//
// Reads follow docs/api.md ("Reads never go back in time"): every answer
// names the Raft index of the state it reflects (X-Molt-Index), and a
// read that names a minimum index (X-Molt-Min-Index) is answered from
// state at least that new, or refused. The clients of the test share one
// session: each read carries the highest index that any call completed
// before it began returned. With that rule a register must be
// linearizable, even when reads are served by a follower or a member cut
// off from the others; without it, only each client's own view is
// monotonic, which is all the API promises to a client that keeps its
// index to itself.
package linearizability
