// Package preflight decides whether a cluster may start an upgrade (SPEC §5).
//
// A preflight run is a fixed list of checks (see Checks). Each check is a
// pure function of an Input and yields one Result: pass, warn or fail, a
// message and per-node data. A failed check of blocking severity blocks the
// upgrade; a warning check never does. Aggregate folds the results into a
// Report with a verdict.
//
// All I/O happens at the edges, in the coordinator: it gathers the Input
// from its replicated state (versions, catalog, agents), from the cluster's
// API server (GatherCluster over a ClusterReader, implemented by
// kube.PreflightReader, so that this package imports no Kubernetes client)
// and from the agents (HostOperations plans the CheckArtifacts and
// ProbePeers operations of each host; HostCheckFromResults reads their
// results back). Run itself reads no clock and does no I/O, so the same
// Input always gives the same Report and a stored run can be re-judged.
// The package imports only the standard library and phases: it has types
// of its own for what it takes from the wire (Release, Agent, HostResult)
// and what it gives to it (HostOperation), and api/convert converts them,
// so the REST API may change without touching the checks. Its types are not
// a format and carry no JSON tags: the REST API encodes api's twins, the
// coordinator persists its state machine's. internal/purity's tests hold
// it to all three.
//
// Hosts probe a sample of their peers: ProbeTargets puts the nodes on a
// ring shuffled by the run's ID and has each probe the next ProbeFanout (8)
// addressed nodes, so every agent is probed by another host, each host
// dials at most 8 peers plus the API endpoint, and a run's operations grow
// as O(N·8) rather than O(N²).
//
// Missing data never passes: a check whose data was not gathered fails and
// says what is missing.
package preflight
