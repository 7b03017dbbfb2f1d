// Package cloud is molt's adapter to managed instance groups (MIGs): the
// interface the MIG strategies (surge, blue/green; SPEC §7) drive, the
// values it speaks in, and its sentinel errors.
//
// A MIG-backed pool has one instance group per zone. molt replaces
// instances itself — it creates a replacement, drains the old node and
// only then deletes it — so a provider's group never replaces or repairs
// instances on its own: a template change applies to new instances only.
//
// Every mutating call carries a request ID derived from the action ID
// that decided it (RequestID), and instance names are chosen by the
// caller, deterministically (phases.ReplacementName and
// phases.GreenGroupName: the engine names what it decides). A new leader that repeats a
// step after a failover therefore repeats the same calls with the same
// names and IDs, and the provider creates or deletes nothing twice:
// creating an instance or group that exists, or deleting one that is
// gone, succeeds.
//
// Implementations: cloud/gce (Compute Engine, over the Compute API's Go
// client), cloud/labcloud (instance groups of systemd-nspawn hosts of the
// local lab, whose book is cloud/memory's) and cloud/memory (in process,
// for unit tests). One contract suite, cloud/cloudtest, runs against all
// three.
package cloud
