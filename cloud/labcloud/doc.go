// Package labcloud carries a cloud.Provider over HTTP, for the lab's
// instance groups (SPEC §7): the groups are systemd-nspawn hosts that the
// lab driver process owns (package lab: Groups), while the coordinator
// members that drive a MIG pool are other processes. The driver serves its
// provider with Handler on the lab network namespace's loopback; a member,
// which runs in that namespace, reaches it through Client, the "lab"
// adapter a cluster's cloud spec names ({"provider": "lab", "endpoint":
// "http://127.0.0.1:PORT"}).
//
// The transport adds nothing to the provider's contract: request IDs and
// names travel as they are, so idempotency is the serving provider's, and
// errors keep their sentinel across the wire (errors.Is works on the
// client's errors and on each Instance.LastError). What only the wire can
// fail — an unreachable service, an answer cut short — is
// cloud.ErrTransient: the caller repeats the call with the same req. The
// contract suite runs against the Client over HTTP (cloud/cloudtest).
package labcloud
