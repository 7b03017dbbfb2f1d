package statemachine

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// Automatic upgrades (SPEC §14). The release channels are part of the
// catalog (CmdPutChannel). The leader's scheduler (package
// maintenance/schedule, driven by the coordinator) decides; each decision
// is a command — start an automatic upgrade (CmdAutoStart), record how
// the last one ended (CmdAutoRecord) — that the apply functions below
// check again on the state it lands on, so a decision made on a state that
// has moved on (by another leader, say) is refused as stale rather than
// applied twice.
//
// A cluster's auto-upgrade record (ClusterRecord.Auto) is the scheduler's
// replicated memory and its audit trail: the last attempt with the reason
// it was started for (Attempt.Reason, which says so when an end of support
// forced it through windows and exclusions), its outcome, the failures in
// a row and the backoff they set.

// ChannelRecord is a release channel's entry in the catalog.
type ChannelRecord struct {
	Name string
	// DefaultVersion is the version the channel offers new clusters (zero:
	// the newest release that lists the channel, if any).
	DefaultVersion phases.Version
	// AutoUpgradeTarget is what subscribed clusters are upgraded towards
	// (zero: nothing is upgraded automatically).
	AutoUpgradeTarget phases.Version
	UpdatedAt         time.Time
}

// PutChannelCmd (CmdPutChannel) sets a release channel's default version
// and auto-upgrade target.
type PutChannelCmd struct {
	Channel           string
	DefaultVersion    phases.Version
	AutoUpgradeTarget phases.Version
	Now               time.Time
}

// AutoStartCmd (CmdAutoStart) is the scheduler's decision to start an
// automatic upgrade, with the preflight run it starts (as StartUpgradeCmd).
type AutoStartCmd struct {
	Cluster string
	To      phases.Version
	// Kind is maintenance.KindPatch or KindMinor.
	Kind maintenance.ChangeKind
	// EndOfSupport: the cluster's minor passed its end of support, and the
	// upgrade runs through windows and exclusions.
	EndOfSupport bool
	// Reason is the scheduler's sentence, kept in the attempt's record.
	Reason string
	// Seq is the cluster's upgrade count the decision was made on: an
	// upgrade started since makes the decision stale.
	Seq int
	// Limits are the concurrency limits the leader decided with.
	Limits    schedule.Limits
	Options   phases.Options
	Preflight *PreflightRun
	Now       time.Time
}

// AutoRecordCmd (CmdAutoRecord) records how the cluster's last automatic
// attempt ended, and so its backoff.
type AutoRecordCmd struct {
	Cluster string
	// Upgrade is the attempt's upgrade; Outcome the end the leader saw.
	Upgrade string
	Outcome string
	Now     time.Time
}

// Channel rules.
const (
	RuleUnknownChannel        = "unknown-channel"
	RuleChannelVersionUnknown = "channel-version-unknown"
)

func (s *state) putChannel(c PutChannelCmd) (any, error) {
	if !schedule.KnownChannel(c.Channel) {
		return nil, &RuleError{Rule: RuleUnknownChannel, Detail: fmt.Sprintf("channel %q is not one of rapid, regular, stable", c.Channel), Err: ErrInvalid}
	}
	for _, v := range []phases.Version{c.DefaultVersion, c.AutoUpgradeTarget} {
		if _, ok := s.Releases[v.String()]; !v.IsZero() && !ok {
			return nil, &RuleError{Rule: RuleChannelVersionUnknown, Detail: fmt.Sprintf("version %s is not in the release catalog", v), Err: ErrUnknownVersion}
		}
	}
	if s.Channels == nil {
		s.Channels = map[string]*ChannelRecord{}
	}
	s.Channels[c.Channel] = &ChannelRecord{Name: c.Channel, DefaultVersion: c.DefaultVersion, AutoUpgradeTarget: c.AutoUpgradeTarget, UpdatedAt: c.Now}
	return nil, nil
}

// autoStart applies a start decision after checking, on this state, what
// the decision rests on: no upgrade started since (Seq), the last attempt's
// end recorded and its backoff over, no registration hold, the target
// within the channel's and the maintenance policy open for the change at
// Now — or, for any cluster on any channel or none, a minor upgrade off a
// minor past its end of support — and the concurrency limits. The version rules, the skew and
// the preflight run are startUpgrade's. Which version the scheduler picks
// (patches first, the catch-up pace) is the leader's choice and is not
// judged again here.
func (s *state) autoStart(c AutoStartCmd) (any, error) {
	if c.Preflight != nil {
		// Before any domain rule: a run this release cannot read is not
		// a refusal (the replica halts), whatever else the entry says.
		if err := checkHostPlan(c.Preflight.HostPlan); err != nil {
			return nil, err
		}
	}
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	if err := s.checkAutoStart(r, c); err != nil {
		return nil, err
	}
	opts := c.Options
	opts.Automatic, opts.EndOfSupport, opts.EmergencyReason = true, c.EndOfSupport, ""
	from := r.StatusVersion
	id, err := s.startUpgrade(StartUpgradeCmd{Cluster: c.Cluster, To: c.To, Options: opts, Now: c.Now, Preflight: c.Preflight})
	if err != nil {
		return nil, err
	}
	r.Auto.Last = &schedule.Attempt{Upgrade: r.Upgrade.ID, From: from, To: c.To, Kind: c.Kind, Reason: c.Reason,
		EndOfSupport: c.EndOfSupport, StartedAt: c.Now}
	return id, nil
}

func (s *state) checkAutoStart(r *ClusterRecord, c AutoStartCmd) error {
	name := r.Spec.Name
	switch {
	case r.Seq != c.Seq:
		return fmt.Errorf("cluster %s started an upgrade since the decision: %w", name, phases.ErrStale)
	case r.PendingUpgrade() != nil:
		return fmt.Errorf("cluster %s: upgrade %s is %s: %w", name, r.Upgrade.ID, r.Upgrade.State, phases.ErrStale)
	case r.Auto.Last != nil && r.Auto.Last.Outcome == "":
		return fmt.Errorf("cluster %s: the end of attempt %s is not recorded yet: %w", name, r.Auto.Last.Upgrade, phases.ErrStale)
	case c.Now.Before(r.Auto.NextAttempt):
		return fmt.Errorf("cluster %s backs off until %s: %w", name, r.Auto.NextAttempt.Format(time.RFC3339), phases.ErrStale)
	case schedule.Held(r.Auto, c.Now):
		// A decision made on a cluster of the same name before it was
		// deleted and registered again lands here with a matching Seq.
		return fmt.Errorf("cluster %s is held after its registration until %s: %w", name, r.Auto.HeldUntil.Format(time.RFC3339), phases.ErrStale)
	case !c.EndOfSupport && !schedule.Subscribed(r.Spec.Channel):
		return fmt.Errorf("cluster %s is on no release channel: %w", name, phases.ErrStale)
	case c.Kind != schedule.KindOf(r.StatusVersion, c.To):
		return fmt.Errorf("cluster %s: %s → %s is not a %s upgrade: %w", name, r.StatusVersion, c.To, c.Kind, phases.ErrStale)
	}
	if c.EndOfSupport {
		// Any cluster leaves an unsupported minor, on a channel or not,
		// whatever its channel's target (schedule's endofsupport.go): to
		// the next minor only, which startUpgrade's version rules hold.
		eos := s.endOfSupport(r.StatusVersion.Minor)
		if c.Kind != maintenance.KindMinor || eos.IsZero() || c.Now.Before(eos) {
			return fmt.Errorf("cluster %s: %s has not passed its end of support: %w", name, r.StatusVersion.MinorString(), phases.ErrStale)
		}
	} else if ch := s.Channels[r.Spec.Channel]; ch == nil || ch.AutoUpgradeTarget.IsZero() || ch.AutoUpgradeTarget.Less(c.To) {
		return fmt.Errorf("cluster %s: %s is past channel %s's auto-upgrade target: %w", name, c.To, r.Spec.Channel, phases.ErrStale)
	} else if r.Policy != nil {
		cp, err := r.Policy.Compile()
		if err != nil {
			return fmt.Errorf("cluster %s: its maintenance policy does not compile: %w", name, phases.ErrStale)
		}
		if d := cp.Allowed(schedule.Change(c.Kind), c.Now); !d.Allowed {
			return fmt.Errorf("cluster %s: the maintenance policy blocks a %s upgrade at %s (%v): %w", name, c.Kind, c.Now.Format(time.RFC3339), d.BlockedBy, phases.ErrStale)
		}
	}
	if !c.EndOfSupport {
		if err := s.checkSequence(r, c.To, c.Now); err != nil {
			return err
		}
	}
	family, fleet := s.inProgress(familyName(&r.Spec))
	perFamily := c.Limits.PerFamily
	if perFamily <= 0 {
		perFamily = schedule.DefaultPerFamily
	}
	if family >= perFamily || (c.Limits.Fleet > 0 && fleet >= c.Limits.Fleet) {
		return fmt.Errorf("cluster %s: %d upgrade(s) in progress in its family, %d in the fleet: %w", name, family, fleet, phases.ErrStale)
	}
	return nil
}

func familyName(spec *phases.ClusterSpec) string {
	if spec.Kind == phases.KindUser {
		return spec.AdminCluster
	}
	return spec.Name
}

// inProgress counts the upgrades in progress in a family and in the fleet.
func (s *state) inProgress(family string) (inFamily, inFleet int) {
	for _, o := range s.Clusters {
		if o.PendingUpgrade() == nil {
			continue
		}
		inFleet++
		if familyName(&o.Spec) == family {
			inFamily++
		}
	}
	return inFamily, inFleet
}

// endOfSupport is the latest end of support among the catalog's releases
// of minor 1.N (zero: unknown).
func (s *state) endOfSupport(minor int) time.Time {
	var eos time.Time
	for _, rel := range s.Releases {
		v, err := phases.ParseVersion(rel.Version)
		if err == nil && v.Minor == minor && rel.EndOfSupport.After(eos) {
			eos = rel.EndOfSupport
		}
	}
	return eos
}

func (s *state) autoRecord(c AutoRecordCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	last := r.Auto.Last
	if last == nil || last.Upgrade != c.Upgrade || last.Outcome != "" {
		return nil, fmt.Errorf("cluster %s: attempt %s has no end to record: %w", c.Cluster, c.Upgrade, phases.ErrStale)
	}
	rec, ok := schedule.Outcome(last, upgradeInfo(r.Upgrade), historyInfo(r, last.Upgrade), c.Now)
	if !ok || rec.Outcome != c.Outcome {
		return nil, fmt.Errorf("cluster %s: attempt %s has not ended %s: %w", c.Cluster, c.Upgrade, c.Outcome, phases.ErrStale)
	}
	r.Auto = schedule.ApplyOutcome(r.Auto, rec)
	return nil, nil
}

// upgradeInfo is what the scheduler reads of an upgrade.
func upgradeInfo(u *phases.Upgrade) *schedule.Upgrade {
	if u == nil {
		return nil
	}
	out := &schedule.Upgrade{ID: u.ID, From: u.From, To: u.To, State: u.State, Automatic: u.Options.Automatic,
		EndOfSupport: u.Options.EndOfSupport, PauseReason: u.PauseReason, FinishedAt: u.FinishedAt, RefusedChecks: slices.Clone(u.RefusedChecks)}
	if u.State == phases.UpgradeCancelled && !u.Closed {
		out.Mixed = u.VersionCounts()[u.To] > 0
	}
	return out
}

// historyInfo finds an upgrade that has ended in the cluster's history.
func historyInfo(r *ClusterRecord, id string) *schedule.Upgrade {
	for i := len(r.History) - 1; i >= 0; i-- {
		h := r.History[i]
		if h.ID != id {
			continue
		}
		from, _ := phases.ParseVersion(h.From)
		to, _ := phases.ParseVersion(h.To)
		return &schedule.Upgrade{ID: h.ID, From: from, To: to, State: phases.UpgradeState(h.State), FinishedAt: h.FinishedAt}
	}
	return nil
}

// policyCache keeps each cluster's compiled maintenance policy between
// scheduler passes, keyed by the stored policy it was compiled from (apply
// functions replace a policy, never change it in place).
type policyCache struct {
	mu sync.Mutex
	m  map[string]compiledPolicy
}

type compiledPolicy struct {
	src     *maintenance.Policy
	c       *maintenance.Compiled
	invalid bool
}

// get returns the compiled form of the cluster's stored policy p; keep
// collects the entries of this pass so that forgotten clusters drop out.
func (pc *policyCache) get(cluster string, p *maintenance.Policy, keep map[string]compiledPolicy) compiledPolicy {
	if p == nil {
		return compiledPolicy{}
	}
	e, ok := pc.m[cluster]
	if !ok || e.src != p {
		e = compiledPolicy{src: p}
		c, err := p.Compile()
		e.c, e.invalid = c, err != nil
	}
	keep[cluster] = e
	return e
}

// SchedulerFleet returns the scheduler's input at this state: every
// cluster with its policy (compiled), its current or last upgrade and its
// auto-upgrade record, the catalog's versions, ends of support and
// channels, and the limits given.
func (f *Machine) SchedulerFleet(limits schedule.Limits) *schedule.Fleet {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.policies.mu.Lock()
	defer f.policies.mu.Unlock()
	s := f.st
	fleet := &schedule.Fleet{Limits: limits, Catalog: s.catalog(), Sequences: scheduleSequences(s.Sequences)}
	keep := make(map[string]compiledPolicy, len(s.Clusters))
	fleet.Clusters = make([]schedule.Cluster, 0, len(s.Clusters))
	for _, name := range sortedKeys(s.Clusters) {
		r := s.Clusters[name]
		cp := f.policies.get(name, r.Policy, keep)
		c := schedule.Cluster{Name: name, Kind: r.Spec.Kind, Admin: r.Spec.AdminCluster, Channel: r.Spec.Channel,
			Current: r.StatusVersion, Policy: cp.c, PolicyInvalid: cp.invalid, Upgrade: upgradeInfo(r.Upgrade), Auto: copyAuto(r.Auto), Seq: r.Seq,
			Drift:  s.drift(r),
			Labels: maps.Clone(r.Spec.Labels)}
		if len(s.Sequences) > 0 {
			// Only a cluster in a sequence reads its past; the scheduler
			// finds which those are.
			c.Past = pastUpgrades(r)
		}
		if l := r.Auto.Last; l != nil && l.Outcome == "" && (r.Upgrade == nil || r.Upgrade.ID != l.Upgrade) {
			c.Ended = historyInfo(r, l.Upgrade)
		}
		fleet.Clusters = append(fleet.Clusters, c)
	}
	f.policies.m = keep
	return fleet
}

// catalog is what the scheduler reads of the release catalog. A channel
// without a default version defaults to the newest release that lists
// it (api.Release.Channels).
func (s *state) catalog() schedule.Catalog {
	cat := schedule.Catalog{EndOfSupport: map[int]time.Time{}, Channels: map[string]schedule.Channel{}}
	listed := map[string]phases.Version{}
	for _, rel := range s.Releases {
		v, err := phases.ParseVersion(rel.Version)
		if err != nil {
			continue
		}
		cat.Versions = append(cat.Versions, v)
		if rel.EndOfSupport.After(cat.EndOfSupport[v.Minor]) {
			cat.EndOfSupport[v.Minor] = rel.EndOfSupport
		}
		for _, ch := range rel.Channels {
			if listed[ch].Less(v) {
				listed[ch] = v
			}
		}
	}
	slices.SortFunc(cat.Versions, phases.Version.Compare)
	for _, name := range schedule.Channels {
		ch := schedule.Channel{Name: name, Default: listed[name]}
		if rec := s.Channels[name]; rec != nil {
			ch.Target = rec.AutoUpgradeTarget
			if !rec.DefaultVersion.IsZero() {
				ch.Default = rec.DefaultVersion
			}
		}
		if !ch.Default.IsZero() || !ch.Target.IsZero() {
			cat.Channels[name] = ch
		}
	}
	return cat
}

// Channels returns the catalog's release channels: every known channel,
// set or not, in order of freshness, with its default as the scheduler
// reads it.
func (f *Machine) Channels() []ChannelRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	cat := f.st.catalog()
	out := make([]ChannelRecord, 0, len(schedule.Channels))
	for _, name := range schedule.Channels {
		rec := ChannelRecord{Name: name, DefaultVersion: cat.Channels[name].Default}
		if r := f.st.Channels[name]; r != nil {
			rec.AutoUpgradeTarget, rec.UpdatedAt = r.AutoUpgradeTarget, r.UpdatedAt
		}
		out = append(out, rec)
	}
	return out
}

// UpgradeStatus answers why the cluster is (not) upgrading at now, as the
// scheduler would decide on this state with these limits.
func (f *Machine) UpgradeStatus(cluster string, now time.Time, limits schedule.Limits) (schedule.Status, error) {
	fleet := f.SchedulerFleet(limits)
	d, ok := schedule.EvaluateCluster(fleet, cluster, now)
	if !ok {
		return schedule.Status{}, fmt.Errorf("cluster %q: %w", cluster, ErrNotFound)
	}
	return d.Status, nil
}

// ClusterSeq returns the cluster's upgrade count (the Seq an AutoStartCmd
// decided on carries).
func (f *Machine) ClusterSeq(cluster string) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return 0, err
	}
	return r.Seq, nil
}
