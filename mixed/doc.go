// Package mixed tests coordinator members of two molt releases side by
// side, as separate molt-coordinator processes (real Raft on disk, the
// members' TLS, the REST API), with build tag mixed (make test-mixed):
//
//   - TestRollingUpgradeFromPreviousRelease: three members built from the
//     previous release (build/previous-release: a commit of this
//     repository's history, built by the test and cached by commit) are
//     upgraded one by one to the current build, the leader restarted in
//     the middle, while a client writes and records every acknowledged
//     write and a cluster upgrade runs on simulated agents against a real
//     kube-apiserver (kube/kubetest). No acknowledged write is lost, the
//     replicated member record (command 42, molt 0.2.0) is written only
//     once the last member runs the current build, `moltctl member check`
//     answers between members, and the cluster upgrade finishes.
//   - TestMemberGivenAnEntryItCannotRead: a member that plays a release
//     without command 42 (build tag hidenewest) is given one anyway by a
//     leader whose capability gate is off (build tag gatebypass): it halts
//     without a panic and says so (readyz, metrics, member list); with the
//     current binary it resumes from its log and agrees with the others.
//
// The previous release's binary is built (internal/prevrelease) from `git
// archive` of its commit into ${MOLT_BUILD_CACHE:-/var/cache/molt}/molt-release/COMMIT/; a warm
// run reuses it. A commit missing from the repository's history (a shallow
// clone) fails the test: fetch the history.
package mixed
