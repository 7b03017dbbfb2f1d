package api

import "time"

// RegisterRequest is an agent's first call: a join token proves it may join,
// and the cluster and node name say which registered Node it runs on.
type RegisterRequest struct {
	Token        string `json:"token"`
	Cluster      string `json:"cluster"`
	Node         string `json:"node"`
	Address      string `json:"address,omitempty"` // host:port of the agent's probe listener
	AgentVersion string `json:"agentVersion,omitempty"`
}

// RegisterResponse tells the agent its identity and rhythm.
type RegisterResponse struct {
	Cluster                  string `json:"cluster"`
	Node                     string `json:"node"`
	HeartbeatIntervalSeconds int    `json:"heartbeatIntervalSeconds"`
}

// ComponentHealth is the health of one host component.
type ComponentHealth struct {
	Healthy bool   `json:"healthy"`
	Version string `json:"version,omitempty"`
	Message string `json:"message,omitempty"`
}

// StaticPodStatus is one static pod as the agent sees it through containerd.
type StaticPodStatus struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Ready bool   `json:"ready"`
}

// DiskFree is the free space of the filesystem holding Path.
type DiskFree struct {
	Path      string `json:"path"`
	FreeBytes uint64 `json:"freeBytes"`
}

// AgentHealth is an agent's heartbeat body. The coordinator keeps liveness on
// the leader in memory and commits only changes of health, not every beat.
type AgentHealth struct {
	Cluster       string            `json:"cluster"`
	Node          string            `json:"node"`
	AgentVersion  string            `json:"agentVersion,omitempty"`
	Kubelet       ComponentHealth   `json:"kubelet"`
	Containerd    ComponentHealth   `json:"containerd"`
	StaticPods    []StaticPodStatus `json:"staticPods,omitempty"`
	Disk          []DiskFree        `json:"disk,omitempty"`
	LastOperation *OperationResult  `json:"lastOperation,omitempty"`
	Time          time.Time         `json:"time"`
}

// OperationsResponse is the answer of an agent's long poll for work.
type OperationsResponse struct {
	Operations []Operation `json:"operations"`
	// Upgrade names the cluster's upgrade in progress when the answer was
	// made (waiting for its preflight or running), "" when none is. A
	// coordinator that predates the field leaves it out (nil): "unknown",
	// not "none". The agent empties its artifact stage when it learns
	// that no upgrade, or another one, is in progress (docs/agent.md,
	// Artifact stage).
	Upgrade *string `json:"upgrade,omitempty"`
}

// RelayedBeats is what a follower sends the leader
// (POST /v1/agents/heartbeats, members only): the agents' heartbeats it
// received that change nothing in its replica, gathered for a short
// window and sent in one request instead of one request each.
type RelayedBeats struct {
	Beats []RelayedBeat `json:"beats"`
}

// RelayedBeat is one agent's heartbeat, which the follower received
// AgeMillis before it sent the batch (measured on the follower's clock
// alone, so no two members' clocks are compared).
type RelayedBeat struct {
	Health    AgentHealth `json:"health"`
	AgeMillis int64       `json:"ageMillis"`
	// Serial is the serial number (hex) of the certificate the agent
	// beat with, which the leader checks is still current for the node:
	// the follower's replica may not have applied a renewal or removal
	// yet. Empty from a follower that predates the field: not checked.
	Serial string `json:"serial,omitempty"`
}

// RelayedBeatsAnswer is the leader's answer to RelayedBeats: one result
// per beat, in the same order.
type RelayedBeatsAnswer struct {
	Results []RelayedBeatResult `json:"results"`
}

// RelayedBeatResult is the leader's answer to one relayed beat: no
// problem when the beat was noted (the follower answers the agent 204),
// or the problem the leader would have answered the beat sent on its own.
type RelayedBeatResult struct {
	Problem *Problem `json:"problem,omitempty"`
}

// ReadIndex is the leader's answer to GET /v1/read-index (members only):
// an index that covers every write the leader had acknowledged when it
// answered. A follower that has applied it judges an operator's token or
// web session by state no older than the request (docs/security.md,
// "Revoking a credential").
type ReadIndex struct {
	Index uint64 `json:"index"`
}
