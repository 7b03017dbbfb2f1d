package coordinator

import "github.com/moltproject/molt/coordinator/statemachine"

// The replicated state's types, commands and apply functions live in
// package statemachine; these are the names of it that the coordinator's
// API has always exported.

// RuleError is a refusal naming the rule it enforces, for refusals that are
// not version rules (those come from phases): statemachine.RuleError.
type RuleError = statemachine.RuleError

// PreflightRun is one stored preflight run: statemachine.PreflightRun.
type PreflightRun = statemachine.PreflightRun

// PreflightSummary is a stored run without its operations and results:
// statemachine.PreflightSummary.
type PreflightSummary = statemachine.PreflightSummary

// Pool commands (SPEC §7), as the state machine names them.
const (
	PoolCancel   = statemachine.PoolCancel
	PoolResume   = statemachine.PoolResume
	PoolRollback = statemachine.PoolRollback
	PoolComplete = statemachine.PoolComplete
)

// ArtifactPathPrefix starts the paths of artifacts the coordinator serves
// from its artifact directory (statemachine.ArtifactPathPrefix).
const ArtifactPathPrefix = statemachine.ArtifactPathPrefix
