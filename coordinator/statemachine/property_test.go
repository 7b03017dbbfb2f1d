package statemachine

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// propSteps bounds the commands of one generated sequence; rapid runs 100
// sequences by default (-rapid.checks), so a run applies about
// 100 × propSteps/2 commands, each to three machines.
const propSteps = 120

// TestPropertyCommandSequences applies random sequences of commands, valid
// and invalid, of every command type, through the registry of apply
// functions as raftstore does (each command encoded to its log entry
// bytes, then decoded and applied), and holds the state machine to three
// properties at every step:
//
//   - a refused command changes nothing: the state snapshots to the same
//     bytes before and after it, and Precheck, which runs the same apply
//     function on scratch copies, changes nothing and agrees with the
//     apply on whether the command is refused;
//   - snapshot, restore and replay agree: a machine restored from the
//     snapshot taken before the step, and a replica that has applied the
//     same entries from empty, answer the step's command as the live
//     machine does and end in the same state, compared both as snapshot
//     bytes and field by field in memory; at the end, a fresh machine
//     replaying the whole log ends there too;
//   - what queries and apply functions return shares no memory with the
//     state: no pointer, map or slice backing array of a result lies in
//     the state's memory, and changing every field of every result leaves
//     the state as it was.
//
// Commands are drawn from a small universe of names (five clusters, a few
// versions, nodes, tokens, runs) so that they collide; those that drive an
// upgrade are read off the state as the leader would (phases.Decide on a
// copy of the upgrade, results pinned to the node's cursor and attempt),
// and spoiled at random (another upgrade, a stale cursor or attempt, an
// unknown cluster or node, a bad version) to make invalid ones.
func TestPropertyCommandSequences(t *testing.T) {
	var stats propStats
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		h := newPropHarness(rt)
		if often(rt, "bootstrap") {
			h.bootstrap(rt)
		}
		n := rapid.IntRange(1, propSteps).Draw(rt, "commands")
		for range n {
			h.advanceClock(rt)
			h.step(rt, h.command(rt, false))
		}
		h.replayAll(rt)
		stats.add(&h.stats)
	})
	t.Logf("%d sequences, %d commands (%d refused) in %s; applied/refused by type: %s",
		stats.runs, stats.commands, stats.refused, time.Since(start).Round(time.Millisecond), stats.byType())
}

// propStats counts what the generated sequences applied.
type propStats struct {
	runs, commands, refused int
	applied, refusedBy      map[raftstore.CommandType]int
}

func (s *propStats) add(o *propStats) {
	if s.applied == nil {
		s.applied, s.refusedBy = map[raftstore.CommandType]int{}, map[raftstore.CommandType]int{}
	}
	s.runs++
	s.commands += o.commands
	s.refused += o.refused
	for k, v := range o.applied {
		s.applied[k] += v
	}
	for k, v := range o.refusedBy {
		s.refusedBy[k] += v
	}
}

func (s *propStats) count(typ raftstore.CommandType, err error) {
	if s.applied == nil {
		s.applied, s.refusedBy = map[raftstore.CommandType]int{}, map[raftstore.CommandType]int{}
	}
	s.commands++
	if err != nil {
		s.refused++
		s.refusedBy[typ]++
	} else {
		s.applied[typ]++
	}
}

func (s *propStats) byType() string {
	var types []raftstore.CommandType
	for t := range decoders() {
		types = append(types, t)
	}
	slices.Sort(types)
	out := ""
	for _, t := range types {
		out += fmt.Sprintf(" %d:%d/%d", t, s.applied[t], s.refusedBy[t])
	}
	return out
}

// propHarness is one sequence: the live machine, a replica applying the
// same entries, the log so far, and the leader's clock.
type propHarness struct {
	live, replica   *Machine
	liveH, replicaH map[raftstore.CommandType]func(uint64, []byte) (any, error)
	log             [][]byte
	now             time.Time
	serial          int
	stats           propStats
}

func handlersOf(m *Machine) map[raftstore.CommandType]func(uint64, []byte) (any, error) {
	out := map[raftstore.CommandType]func(uint64, []byte) (any, error){}
	for t, h := range m.Handlers() {
		out[t] = h
	}
	return out
}

func newPropHarness(rt *rapid.T) *propHarness {
	h := &propHarness{live: New(), replica: New(), now: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
	h.liveH, h.replicaH = handlersOf(h.live), handlersOf(h.replica)
	return h
}

// applyEntry applies one log entry as raftstore's FSM does.
func applyEntry(rt *rapid.T, handlers map[raftstore.CommandType]func(uint64, []byte) (any, error), index uint64, entry []byte) (any, error) {
	typ, body, err := raftstore.Decode(entry)
	require.NoError(rt, err)
	apply, ok := handlers[typ]
	require.True(rt, ok, "no handler for type %s", typ)
	return apply(index, body)
}

func snapshotOf(rt *rapid.T, m *Machine) []byte {
	b, err := m.Snapshot()
	require.NoError(rt, err)
	return b
}

// step applies one command to the live machine, the replica and a machine
// restored from the live one's snapshot, and checks the properties.
func (h *propHarness) step(rt *rapid.T, cmd Command) {
	typ := cmd.Type()
	entry, err := raftstore.Encode(cmd)
	require.NoError(rt, err)
	before := snapshotOf(rt, h.live)

	prechecked := isPrechecked(cmd)
	var precheckErr error
	if prechecked {
		precheckErr = h.live.Precheck(cmd)
		require.Equal(rt, string(before), string(snapshotOf(rt, h.live)), "Precheck of %T changed the state", cmd)
	}

	restored := New()
	require.NoError(rt, restored.Restore(before))
	index := uint64(len(h.log) + 1)
	h.log = append(h.log, entry)
	v, err := applyEntry(rt, h.liveH, index, entry)
	vr, errR := applyEntry(rt, h.replicaH, index, entry)
	vs, errS := applyEntry(rt, handlersOf(restored), index, entry)
	h.stats.count(typ, err)

	require.Equal(rt, errString(err), errString(errR), "the replica answered %T differently", cmd)
	require.Equal(rt, errString(err), errString(errS), "the machine restored before %T answered it differently", cmd)
	require.Empty(rt, sameValue(reflect.ValueOf(v), reflect.ValueOf(vr), "value"), "the replica returned another value for %T", cmd)
	require.Empty(rt, sameValue(reflect.ValueOf(v), reflect.ValueOf(vs), "value"), "the restored machine returned another value for %T", cmd)

	after := snapshotOf(rt, h.live)
	require.Equal(rt, string(after), string(snapshotOf(rt, h.replica)), "the replica's state differs after %T", cmd)
	require.Equal(rt, string(after), string(snapshotOf(rt, restored)), "the restored machine's state differs after %T", cmd)
	require.Empty(rt, sameValue(reflect.ValueOf(h.live.st).Elem(), reflect.ValueOf(restored.st).Elem(), "state"),
		"the restored machine's state differs in memory after %T", cmd)
	require.Empty(rt, sameValue(reflect.ValueOf(h.live.st).Elem(), reflect.ValueOf(h.replica.st).Elem(), "state"),
		"the replica's state differs in memory after %T", cmd)

	if err != nil {
		require.Equal(rt, string(before), string(after), "refused %T (%v) changed the state", cmd, err)
	}
	if prechecked {
		require.Equal(rt, err == nil, precheckErr == nil, "Precheck of %T said %v, the apply %v", cmd, precheckErr, err)
	}

	// What the apply function returned, and what the queries return,
	// share nothing with the state. The queries run on one step in four:
	// walking their results is most of the test's time, and over a run
	// they still meet every kind of state.
	switch {
	case rapid.IntRange(0, 3).Draw(rt, "check queries") == 0:
		h.checkQueries(rt, after, fmt.Sprintf("apply result of %T", cmd), v)
	case v != nil:
		h.checkIsolated(rt, after, map[string]any{fmt.Sprintf("apply result of %T", cmd): v})
	}
}

// bootstrap starts a sequence as most fleets start: the catalog, the
// clusters, their agents, channels. Each of its commands is a step like
// any other, checked as such.
func (h *propHarness) bootstrap(rt *rapid.T) {
	for _, v := range propVersions {
		h.step(rt, PutReleaseCmd{Release: api.Release{Version: v, EndOfSupport: h.now.Add(90 * 24 * time.Hour),
			Channels: []string{"regular"}}, Now: h.now})
	}
	for _, c := range propClusters[:4] {
		spec := h.spec(rt, c)
		spec.Version = phases.MustParseVersion(propVersions[0])
		if c == "adm" {
			spec.Version = phases.MustParseVersion(propVersions[1])
		}
		h.step(rt, PutClusterCmd{Spec: spec, Now: h.now})
		for _, n := range propNodes[:3] {
			h.step(rt, AgentRegisterCmd{Cluster: c, Node: n, Address: n + ":7443", Now: h.now})
		}
	}
	h.step(rt, PutChannelCmd{Channel: "regular", AutoUpgradeTarget: phases.MustParseVersion(propVersions[2]), Now: h.now})
	h.step(rt, PutTokenCmd{Token: TokenRecord{ID: "op1", Kind: TokenKindAPI, SecretHash: "h", Role: "admin"}, Now: h.now})
	h.step(rt, PutTokenCmd{Token: TokenRecord{ID: "bt1", Kind: TokenKindBootstrap, SecretHash: "h", Cluster: "a", Uses: 3,
		Expires: h.now.Add(30 * 24 * time.Hour)}, Now: h.now})
	if often(rt, "upgrade a") {
		h.step(rt, StartUpgradeCmd{Cluster: "a", To: phases.MustParseVersion(propVersions[1]), Now: h.now,
			Options: phases.Options{ConcurrentWorkerPools: 1}})
	}
}

// replayAll replays the whole log into a fresh machine.
func (h *propHarness) replayAll(rt *rapid.T) {
	m := New()
	hs := handlersOf(m)
	for i, e := range h.log {
		_, _ = applyEntry(rt, hs, uint64(i+1), e)
	}
	require.Equal(rt, string(snapshotOf(rt, h.live)), string(snapshotOf(rt, m)), "replaying the log gives another state")
}

func isPrechecked(cmd any) bool {
	switch cmd.(type) {
	case PutClusterCmd, DeleteClusterCmd, PoolCommandCmd, RetryNodeCmd, NodeStepResultCmd, AgentRegisterCmd, PutChannelCmd:
		return true
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkQueries calls every query of the machine with names of the
// universe and checks what each returns against the state.
func (h *propHarness) checkQueries(rt *rapid.T, snap []byte, applied string, result any) {
	m := h.live
	out := map[string]any{applied: result}
	out["Releases"] = m.Releases()
	out["Clusters"] = m.Clusters()
	out["ActiveUpgrades"] = m.ActiveUpgrades()
	out["Agents"] = m.Agents()
	out["RunningPreflights"] = m.RunningPreflights()
	out["Tokens"] = m.Tokens()
	out["Channels"] = m.Channels()
	logs, _ := m.AuditLog(AuditQuery{Limit: 1000})
	out["AuditLog"] = logs
	fleet := m.SchedulerFleet(schedule.Limits{})
	out["SchedulerFleet"] = fleet
	v := pick(rt, "query release", propVersions...)
	rel, _ := m.Release(v)
	out["Release "+v] = rel
	// One cluster's queries, and one token's, a step: over thousands of
	// steps, each query meets every kind of record.
	c := pick(rt, "query cluster", propClusters...)
	r, _ := m.Cluster(c)
	out["Cluster "+c] = r
	u, _ := m.Upgrade(c)
	out["Upgrade "+c] = u
	p, _ := m.Policy(c)
	out["Policy "+c] = p
	runs, _ := m.Preflights(c)
	out["Preflights "+c] = runs
	for _, s := range runs {
		run, _ := m.Preflight(c, s.Run.ID)
		out["Preflight "+c+"/"+s.Run.ID] = run
	}
	st, _ := m.UpgradeStatus(c, h.now, schedule.Limits{})
	out["UpgradeStatus "+c] = st
	to := h.target(rt, c)
	cr, _ := m.CheckUpgrade(c, to)
	out["CheckUpgrade "+c] = cr
	in, _ := m.PreflightInput(c, to)
	out["PreflightInput "+c] = in
	for _, n := range propNodes {
		a, _ := m.Agent(c, n)
		out["Agent "+c+"/"+n] = a
	}
	id := pick(rt, "query token", propTokens...)
	out["Token "+id], _ = m.Token(id)
	out["CheckToken "+id], _ = m.CheckToken(id, TokenKindBootstrap, h.now)
	h.checkIsolated(rt, snap, out)
}

// checkIsolated checks that no result holds a reference into the state's
// memory, then changes every field of every result in place and checks
// the state still snapshots to snap.
func (h *propHarness) checkIsolated(rt *rapid.T, snap []byte, results map[string]any) {
	st := memoryOf(reflect.ValueOf(h.live.st), "", false)
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if results[n] == nil {
			continue
		}
		res := memoryOf(reflect.ValueOf(results[n]), "", false)
		for _, r := range res.ranges {
			if st.overlap(r) {
				// Again, naming every reference, to say which is shared.
				st, res := memoryOf(reflect.ValueOf(h.live.st), "state", true), memoryOf(reflect.ValueOf(results[n]), n, true)
				for _, r := range res.ranges {
					if st.overlap(r) {
						rt.Fatalf("%s shares memory with the state: %s is %s", n, r.path, st.overlapping(r))
					}
				}
			}
		}
	}
	for _, n := range names {
		if results[n] == nil {
			continue
		}
		if f, ok := results[n].(*schedule.Fleet); ok {
			cp := *f
			cp.Clusters = slices.Clone(f.Clusters)
			for i := range cp.Clusters {
				cp.Clusters[i].Policy = nil // the machine's cache (see checkQueries)
			}
			results[n] = &cp
		}
		v := reflect.New(reflect.TypeOf(results[n])).Elem()
		v.Set(reflect.ValueOf(results[n]))
		mutate(v)
	}
	require.Equal(rt, string(snap), string(snapshotOf(rt, h.live)), "changing what queries returned changed the state")
}

// memRange is memory a value refers to: a pointer's target, a slice's
// backing array up to its capacity, or a map (one byte at its header).
type memRange struct {
	lo, hi uintptr
	path   string
}

// memory is every range a value refers to, sorted by start, with the
// running maximum of their ends so overlap is a binary search.
type memory struct {
	ranges []memRange
	maxHi  []uintptr
}

func memoryOf(v reflect.Value, path string, paths bool) *memory {
	m := &memory{}
	collectRefs(v, refPath{path, paths}, &m.ranges, map[uintptr]bool{})
	sort.Slice(m.ranges, func(i, j int) bool { return m.ranges[i].lo < m.ranges[j].lo })
	m.maxHi = make([]uintptr, len(m.ranges))
	var hi uintptr
	for i, r := range m.ranges {
		hi = max(hi, r.hi)
		m.maxHi[i] = hi
	}
	return m
}

// overlap reports whether a range of m overlaps r.
func (m *memory) overlap(r memRange) bool {
	j := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].lo >= r.hi }) - 1
	return j >= 0 && m.maxHi[j] > r.lo
}

// overlapping returns the path of a range of m that overlaps r.
func (m *memory) overlapping(r memRange) string {
	for _, o := range m.ranges {
		if o.lo < r.hi && r.lo < o.hi {
			return o.path
		}
	}
	return "?"
}

// refPath names a reference, when names are wanted: building them costs
// more than the walk, so the walk runs without them first.
type refPath struct {
	s  string
	on bool
}

func (p refPath) add(format string, args ...any) refPath {
	if !p.on {
		return p
	}
	return refPath{p.s + fmt.Sprintf(format, args...), true}
}

// collectRefs appends the memory v refers to, recursively. Unexported
// fields are read too, but for those copies share on purpose
// (sharedByDesign); strings and a time's location are never written and
// are left out.
func collectRefs(v reflect.Value, path refPath, out *[]memRange, seen map[uintptr]bool) {
	if !v.IsValid() || v.Type() == timeType {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		p := v.Pointer()
		if size := v.Type().Elem().Size(); size > 0 {
			*out = append(*out, memRange{p, p + size, path.s})
		}
		if seen[p] {
			return
		}
		seen[p] = true
		collectRefs(v.Elem(), path, out, seen)
	case reflect.Slice:
		if v.Cap() == 0 {
			return
		}
		if size := v.Type().Elem().Size(); size > 0 {
			p := v.Pointer()
			*out = append(*out, memRange{p, p + uintptr(v.Cap())*size, path.add(" (backing array)").s})
		}
		for i := range v.Len() {
			collectRefs(v.Index(i), path.add("[%d]", i), out, seen)
		}
	case reflect.Array:
		for i := range v.Len() {
			collectRefs(v.Index(i), path.add("[%d]", i), out, seen)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		p := uintptr(v.UnsafePointer())
		*out = append(*out, memRange{p, p + 1, path.add(" (map)").s})
		it := v.MapRange()
		for it.Next() {
			collectRefs(it.Value(), path.add("{%v}", it.Key()), out, seen)
		}
	case reflect.Interface:
		if !v.IsNil() {
			collectRefs(v.Elem(), path, out, seen)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() && sharedByDesign[v.Type().String()+"."+f.Name] != "" {
				continue
			}
			collectRefs(v.Field(i), path.add(".%s", f.Name), out, seen)
		}
	}
}

// sameValue compares two values field by field, unexported fields
// included (but for the lookup indexes of sharedByDesign, built on
// demand), a nil map or slice equal to an empty one and times by
// instant; it returns the path of the first difference, or "".
func sameValue(a, b reflect.Value, path string) string {
	if a.IsValid() != b.IsValid() {
		return path + " (one is nil)"
	}
	if !a.IsValid() {
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: %s vs %s", path, a.Type(), b.Type())
	}
	if a.Type() == timeType {
		ta, tb := timeOf(a), timeOf(b)
		if !ta.Equal(tb) {
			return fmt.Sprintf("%s: %s vs %s", path, ta, tb)
		}
		return ""
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path + " (one is nil)"
			}
			return ""
		}
		return sameValue(a.Elem(), b.Elem(), path)
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: length %d vs %d", path, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if d := sameValue(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d entries vs %d", path, a.Len(), b.Len())
		}
		it := a.MapRange()
		for it.Next() {
			e := b.MapIndex(it.Key())
			if !e.IsValid() {
				return fmt.Sprintf("%s{%v}: missing", path, it.Key())
			}
			if d := sameValue(it.Value(), e, fmt.Sprintf("%s{%v}", path, it.Key())); d != "" {
				return d
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() && sharedByDesign[a.Type().String()+"."+f.Name] != "" {
				continue
			}
			if d := sameValue(a.Field(i), b.Field(i), path+"."+f.Name); d != "" {
				return d
			}
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return fmt.Sprintf("%s: %v vs %v", path, a.Bool(), b.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %v vs %v", path, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %v vs %v", path, a.Uint(), b.Uint())
		}
	case reflect.Float32, reflect.Float64:
		if a.Float() != b.Float() {
			return fmt.Sprintf("%s: %v vs %v", path, a.Float(), b.Float())
		}
	case reflect.String:
		if a.String() != b.String() {
			return fmt.Sprintf("%s: %q vs %q", path, a.String(), b.String())
		}
	default:
		return fmt.Sprintf("%s: cannot compare a %s; teach sameValue", path, a.Kind())
	}
	return ""
}

// timeOf reads a time.Time, exported or not.
func timeOf(v reflect.Value) time.Time {
	if v.CanInterface() {
		return v.Interface().(time.Time)
	}
	cp := reflect.New(timeType).Elem()
	cp.Set(reflect.NewAt(timeType, v.Addr().UnsafePointer()).Elem())
	return cp.Interface().(time.Time)
}
