// Package agent is molt's host agent: it registers with the coordinator,
// reports the host's health, long-polls for typed operations and executes
// them — upgrade the kubelet or containerd binary, replace static-pod
// manifests, import or pull images, roll back, and the preflight checks.
//
// The agent never runs arbitrary commands: it accepts only the closed set
// of api.OperationKind. Every operation is idempotent by its ID and
// resumable: progress is recorded at named steps in an append-only, fsync'd
// journal under DataDir, so after a crash the agent continues (or finishes
// and reports) each unfinished operation, and an ID that already finished is
// never executed again — its recorded result is reported instead.
//
// Host effects go through small interfaces (Units, Runtime, PodObserver,
// Hooks) so tests can drive them; cmd/molt-agent wires the real ones.
package agent
