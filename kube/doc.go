// Package kube is molt's only door to the Kubernetes API: it cordons and
// uncordons nodes, marks a blue pool's nodes for the cluster autoscaler
// (autoscaler.go), drains them best effort through the Eviction API, reads
// node readiness and kubelet versions, and answers the preflight questions
// "which pods are protected" and "which PodDisruptionBudgets block" —
// PreflightReader gathers those, with node readiness and /readyz, as
// preflight's ClusterReader.
// It applies manifest text with server-side apply as field manager "molt"
// and waits for the DaemonSets and Deployments applied to roll out
// (apply.go, rollout.go): the upgrade's add-ons step.
// For tools such as the lab it also creates objects from manifest text
// (objects.go), lists nodes and pods as plain Go values (node.go, pods.go)
// and reads pod logs (logs.go), so no other package needs Kubernetes types.
//
// Everything else in molt sees small interfaces defined where they are used;
// only this package imports client-go. All time comes from the injected
// clock, so drains with a 20-minute timeout are tested in milliseconds with a
// fake clock against a real kube-apiserver (see kube/kubetest).
package kube
