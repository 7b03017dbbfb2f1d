package preflight

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Keys of a host operation's result details (api.OperationResult.Details),
// as agent/preflight.go fills them.
const (
	// DetailArtifactPrefix + artifact name → "ok" or the download or
	// checksum error (CheckArtifacts).
	DetailArtifactPrefix = "artifact."
	// DetailFreeBytesPrefix + filesystem path → free bytes in decimal
	// (CheckArtifacts).
	DetailFreeBytesPrefix = "freeBytes."
	// DetailRequiredBytes → bytes the upgrade needs on the host, in
	// decimal (CheckArtifacts). The agent does not fill it yet; until it
	// does, disk-space applies Input.MinFreeBytes alone.
	DetailRequiredBytes = "requiredBytes"
	// DetailOK is the value of a check that passed. ProbePeers keys its
	// details by the probed address itself, "ok" or the dial error.
	DetailOK = "ok"
)

// HostOp is the kind of a host operation of a preflight run; it is also
// the suffix of the operation's ID (OperationID). api/convert maps it to
// and from the wire's operation kinds (CheckArtifacts, ProbePeers).
type HostOp string

const (
	// HostOpArtifacts downloads the release's artifacts and checks their
	// sums and the host's free space.
	HostOpArtifacts HostOp = "artifacts"
	// HostOpPeers probes other agents and the API server.
	HostOpPeers HostOp = "peers"
)

// HostOperation is one host operation of a preflight run, as the engine
// plans it: api/convert writes it as the agent's operation.
type HostOperation struct {
	ID string
	Op HostOp
	// Artifacts are what HostOpArtifacts checks.
	Artifacts []Artifact
	// Addresses are what HostOpPeers probes.
	Addresses []string
}

// HostResult is what a host reported of one host operation, read from the
// wire by api/convert.
type HostResult struct {
	ID string
	// Op is the operation's kind; empty when the report did not say, and
	// then ID's suffix tells.
	Op HostOp
	// Finished is set once the operation succeeded or failed; Succeeded
	// when it succeeded.
	Finished, Succeeded bool
	FinishedAt          time.Time
	Message             string
	Details             map[string]string
}

// OperationID is the ID of the preflight operation of kind for node in
// run runID: "preflight-<run>-<node>-artifacts" or "...-peers". It is
// deterministic, so building the operations twice (a new leader resuming a
// run) yields the same IDs and the agent runs each once. The agent uses the
// ID as a directory name: runID must be made of [a-z0-9-].
func OperationID(runID, node string, op HostOp) string {
	return "preflight-" + runID + "-" + node + "-" + string(op)
}

// HostOperations builds, for every node of in.Cluster, the host
// operations of a preflight run:
//   - CheckArtifacts with the release's artifacts (kubelet, containerd,
//     image archives), when in.Release is set;
//   - ProbePeers with the agent addresses of the node's ProbeTargets (at
//     most ProbeFanout peers, sorted) and then apiEndpoint (host:port of
//     the cluster's API server), which every node probes when it is given.
//
// Nodes without an address in agentAddrs are not probed by the others:
// agents-reporting already fails for them. The whole result grows as
// O(N·ProbeFanout) addresses, not O(N²): it is committed in one Raft entry.
func HostOperations(runID string, in Input, apiEndpoint string, agentAddrs map[string]string) map[string][]HostOperation {
	var artifacts []Artifact
	if in.Release != nil {
		for _, a := range in.Release.Artifacts {
			if a.URL != "" {
				artifacts = append(artifacts, a)
			}
		}
	}
	nodes := NodeNames(in.Cluster)
	targets := ProbeTargets(runID, nodes, agentAddrs)
	out := make(map[string][]HostOperation, len(nodes))
	for _, n := range nodes {
		var ops []HostOperation
		if in.Release != nil {
			ops = append(ops, HostOperation{
				ID:        OperationID(runID, n, HostOpArtifacts),
				Op:        HostOpArtifacts,
				Artifacts: slices.Clone(artifacts),
			})
		}
		addrs := []string{}
		for _, peer := range targets[n] {
			addrs = append(addrs, agentAddrs[peer])
		}
		slices.Sort(addrs)
		if apiEndpoint != "" {
			addrs = append(addrs, apiEndpoint)
		}
		ops = append(ops, HostOperation{
			ID:        OperationID(runID, n, HostOpPeers),
			Op:        HostOpPeers,
			Addresses: slices.Compact(addrs),
		})
		out[n] = ops
	}
	return out
}

// HostCheckFromResults reads one host's preflight operation results back.
// Only finished results count (a "running" report is no answer yet); of
// several of one kind the last finished one wins. A result's kind comes
// from Op, or from its ID's suffix when Op is empty.
func HostCheckFromResults(results []HostResult) HostCheck {
	var art, peers *HostResult
	for i := range results {
		r := &results[i]
		if !r.Finished {
			continue
		}
		switch kindOf(*r) {
		case HostOpArtifacts:
			if art == nil || !r.FinishedAt.Before(art.FinishedAt) {
				art = r
			}
		case HostOpPeers:
			if peers == nil || !r.FinishedAt.Before(peers.FinishedAt) {
				peers = r
			}
		}
	}
	var h HostCheck
	if art != nil {
		readArtifacts(&h, *art)
	}
	if peers != nil {
		readPeers(&h, *peers)
	}
	return h
}

func kindOf(r HostResult) HostOp {
	switch {
	case r.Op != "":
		return r.Op
	case strings.HasSuffix(r.ID, "-"+string(HostOpArtifacts)):
		return HostOpArtifacts
	case strings.HasSuffix(r.ID, "-"+string(HostOpPeers)):
		return HostOpPeers
	}
	return ""
}

func readArtifacts(h *HostCheck, r HostResult) {
	h.ArtifactsChecked = true
	for k, v := range r.Details {
		switch {
		case strings.HasPrefix(k, DetailArtifactPrefix):
			if v != DetailOK {
				if h.FailedArtifacts == nil {
					h.FailedArtifacts = map[string]string{}
				}
				h.FailedArtifacts[strings.TrimPrefix(k, DetailArtifactPrefix)] = v
			}
		case strings.HasPrefix(k, DetailFreeBytesPrefix):
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				if h.FreeBytes == nil {
					h.FreeBytes = map[string]uint64{}
				}
				h.FreeBytes[strings.TrimPrefix(k, DetailFreeBytesPrefix)] = n
			}
		case k == DetailRequiredBytes:
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				h.RequiredBytes = n
			}
		}
	}
	// A failed result is a failure even when no artifact detail says why
	// (an invalid operation, a scratch directory that cannot be created).
	h.ArtifactsOK = r.Succeeded && len(h.FailedArtifacts) == 0
	if !h.ArtifactsOK {
		h.ArtifactsMessage = r.Message
		if h.ArtifactsMessage == "" {
			h.ArtifactsMessage = "CheckArtifacts failed"
		}
	}
}

func readPeers(h *HostCheck, r HostResult) {
	h.PeersProbed = true
	for addr, v := range r.Details {
		if v == DetailOK {
			continue
		}
		if h.Unreachable == nil {
			h.Unreachable = map[string]string{}
		}
		h.Unreachable[addr] = v
	}
	if !r.Succeeded {
		h.ProbeMessage = r.Message
		if h.ProbeMessage == "" {
			h.ProbeMessage = "ProbePeers failed"
		}
	}
}
