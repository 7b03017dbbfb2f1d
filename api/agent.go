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
}
