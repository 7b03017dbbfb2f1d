// Package etcdgate decides whether an etcd cluster is fit for the next
// step of a control-plane upgrade: every member healthy and started,
// exactly one leader, as many members as before the node's upgrade, and
// every member's raft log following the leader's. It is pure: the agent
// takes the samples with the etcd client (agent/etcd_gate.go) and feeds
// them here with their time; the decision names the first rule a sample
// breaks, so an operation's result can say why and how long the gate held.
package etcdgate
