// Package etcdbackup takes an etcd snapshot through the etcd v3 client's
// Maintenance API and describes it (sha256, revision, size, time), and
// decides which snapshots a retention of N keeps.
//
// It is its own package so that only the component that takes snapshots
// links the etcd client (and the gRPC stack it pulls in); the agent's and
// the coordinator's other packages do not import it. docs/backup.md says
// where snapshots are taken and kept and how one is restored.
package etcdbackup
