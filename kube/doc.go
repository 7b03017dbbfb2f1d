// Package kube is molt's only door to the Kubernetes API: it cordons and
// uncordons nodes, drains them best effort through the Eviction API, reads
// node readiness and kubelet versions, and answers the preflight questions
// "which pods are protected" and "which PodDisruptionBudgets block".
//
// Everything else in molt sees small interfaces defined where they are used;
// only this package imports client-go. All time comes from the injected
// clock, so drains with a 20-minute timeout are tested in milliseconds with a
// fake clock against a real kube-apiserver (see kube/kubetest).
package kube
