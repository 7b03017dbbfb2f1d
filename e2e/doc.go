// Package e2e runs molt end to end on this machine: the lab's real
// Kubernetes cluster on systemd-nspawn hosts, a three-member coordinator
// (real Raft on disk, over the lab namespace's loopback) and molt-agent on
// every host, installed by systemd/install.sh, and a MIG-backed worker
// pool whose instances are hosts of the lab's instance groups (mig.go),
// driven through the "lab" cloud adapter. The coordinator members run
// inside the lab's network namespace, so the agents reach them at
// 10.77.0.1 and they reach the cluster's API server through the lab's
// control-plane load balancer; nothing of the lab is routed on the
// machine's own interfaces.
//
// The same code drives `molt-lab demo` (the README's main command: the
// minor, the MIG pool by surge, verified with the checks of verify.go) and
// the end-to-end tests (`go test -tags e2e ./e2e/`, from the newer minor),
// which add faults: a Raft leader killed and an agent killed mid-operation
// under a chaos schedule; the MIG pool by blue/green rolled back and then
// completed through the pool commands.
//
// It follows an upgrade as any client of the API does: api.Upgrade, with
// the coordinator's reading of it (inProgress, each node's step), and
// imports no engine package (internal/purity holds it, and its tests, to
// that; kube, which it drives the cluster through, is the coordinator's
// own Kubernetes edge and may). The chaos checks' unit tests read the lab's
// upgrade from testdata/lab-upgrade.json, as the coordinator answers it.
package e2e
