// Package statemachine is the coordinator's replicated state machine, and
// the format it keeps on disk: the state (clusters, releases, upgrades,
// agents' replicated liveness, maintenance policies, preflight runs, the
// audit log of requests in audit.go), the commands that change it with
// their literal numbers (commands.go), the apply function of each
// (Handlers), and the snapshot encoding (snapshot.go). Kubeconfigs reach it sealed, and stay so in the
// log, the state and the snapshots (secrets.go).
//
// Three kinds of types meet here, each declared once. The state and the
// commands hold the engine's values (phases, preflight, maintenance) and
// the API's wire types (api) as they are used; the bytes of log entries
// and snapshots are those of this package's own persisted types,
// persisted_v1_*.go, which are append-only, and conversions run when a
// command is encoded or decoded and when a snapshot is written or read.
// So the engine and the API may change their structs freely, as long as
// the conversions keep old logs applying to the same state (persisted.go
// has the rules; golden_test.go and persisted_v1_test.go hold to them).
//
// Every command is a Command: it knows its number (Type, returning the
// literal of commands.go), so the coordinator proposes the command alone
// and cannot pair a body with another command's number. Entries and
// snapshots decode strictly: a field the persisted form does not declare
// refuses the command (an error value wrapping raftstore's
// ErrUnknownField, the state unchanged) or the snapshot, and is never
// dropped (strict_test.go); so does a step layout newer than this
// release knows, or an audited command of a number it does not know
// (command.ErrCannotRead, readable_test.go). raftstore halts the replica
// at such an entry: a newer release wrote it. commandSince names the
// release that introduced each command number, which raftstore writes
// into every entry.
//
// It is pure: no I/O, no logging, no clock (every command carries the
// leader's Now), no Kubernetes and no Raft store — internal/purity's test
// holds it to that. Machine implements raftstore.Machine through the types
// of the pure package raftstore/command, so raftstore replicates it without
// this package importing Raft, and a log can be replayed through a fresh
// Machine alone (golden_test.go does).
//
// Apply functions run under the Machine's write lock; a domain refusal is
// an error value wrapping one of this package's sentinels (ErrNotFound, …,
// RuleError), or phases.ErrStale for a decision the state has moved past.
// Readers outside the package use typed queries (queries.go), which take
// the read lock and return copies, never references into the state:
// copy.go's helpers make them and Precheck's scratch records, and share no
// pointer, map or slice backing array with the state. TestCopiesShareNoMemory
// holds every helper to that on values whose every field is filled by
// reflection, so a field added to a record later is checked too;
// TestPropertyCommandSequences holds every query to it, and the apply
// functions to refusing without change and to snapshot, restore and
// replay agreeing, on random sequences of commands.
package statemachine
