// Package trust holds molt's certificate authority and credentials: the
// cluster CA every member keeps, the member and agent certificates it
// signs, the CA public-key pin clients check it by (kubeadm's
// --discovery-token-ca-cert-hash), and the bearer tokens operators and
// enrolling agents present.
//
// It is pure crypto plus small file helpers: no network, no Raft. Who may
// hold which credential, and where tokens are stored, is the
// coordinator's business.
package trust
