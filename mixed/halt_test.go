//go:build mixed

package mixed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// TestMemberGivenAnEntryItCannotRead: see the package documentation. m1
// leads with its capability gate off (gatebypass), m2 runs the current
// build, m3 plays a member of molt 0.1.0 that halts instead of panicking
// (hidenewest: its registry lacks command 42; its version is 0.1.0). m1
// records the members' capabilities (command 42) as soon as every member
// answered, which the gate would have refused while m3 runs 0.1.0.
func TestMemberGivenAnEntryItCannotRead(t *testing.T) {
	began := time.Now()
	root := repoRoot(t)
	bins := currentBuilds(t, root,
		build{name: "molt-coordinator-gatebypass", pkg: "./cmd/molt-coordinator", tags: "gatebypass", ldflags: releaseLdflags(t, root, "")},
		build{name: "molt-coordinator-hidenewest", pkg: "./cmd/molt-coordinator", tags: "hidenewest", ldflags: releaseLdflags(t, root, "0.1.0")})
	c := startCoordinator(t, []string{bins["molt-coordinator-gatebypass"], bins["molt-coordinator"], bins["molt-coordinator-hidenewest"]})
	m3 := c.members[2]
	ctx := context.Background()
	cl := c.client()
	put := func(key int) {
		t.Helper()
		r := writeRelease(key)
		_, err := cl.Do(ctx, http.MethodPut, "/v1/releases/"+r.Version, r, nil)
		require.NoError(t, err)
	}
	put(1)

	// It halts at command 42: /readyz 503 member-halted naming the
	// release it needs and the entry, still running, no panic.
	var detail string
	waitFor(t, "m3 halted (readyz 503 member-halted)", 2*time.Minute, func() bool {
		var p *api.Problem
		if err := c.ready(m3); errors.As(err, &p) && p.Status == http.StatusServiceUnavailable && p.Rule == "member-halted" {
			detail = p.Detail
			return true
		}
		return false
	})
	t.Logf("m3 /readyz: %s", detail)
	require.Contains(t, detail, "needs molt ≥ 0.2.0")
	require.Contains(t, detail, "(command 42)")
	require.Contains(t, detail, "replace this member's binary")
	log := readFile(t, m3.logPath)
	require.Contains(t, log, "this member cannot read its log and stopped applying it")
	require.NotContains(t, log, "panic:")
	require.NoError(t, m3.exitedByItself())
	require.True(t, m3.running())

	// The others go on without it; it still stores the entries (the
	// leader's member list names why it cannot keep up).
	for k := 2; k <= 20; k++ {
		put(k)
	}
	waitFor(t, "the leader's member list says why m3 cannot keep up", 2*time.Minute, func() bool {
		ms, _, err := c.membersOf(c.waitLeader())
		if err != nil {
			return false
		}
		i := slices.IndexFunc(ms, func(m api.Member) bool { return m.ID == m3.id })
		return i >= 0 && ms[i].Reason == "needs molt ≥ 0.2.0"
	})
	l := c.waitLeader()
	require.NotEqual(t, m3.id, l.id, "a halted member does not lead")
	rows := memberRows(t, c, l)
	t.Logf("the leader's member list with m3 halted:\n%s", rows)

	// Upgraded (its binary replaced), it resumes from its log and agrees.
	m3.stop(syscall.SIGTERM)
	require.NoError(t, m3.start(bins["molt-coordinator"]))
	c.waitReady(m3)
	put(21)
	type view struct {
		Releases []string
		Members  map[string]string // id → version and reason
		Index    uint64            `json:"-"` // writes of the leader's own may pass between two reads
	}
	viewOf := func(m *member) (view, error) {
		mc := c.clientOf(m)
		var rs []api.Release
		if _, err := mc.Do(ctx, http.MethodGet, "/v1/releases", nil, &rs); err != nil {
			return view{}, err
		}
		v := view{Members: map[string]string{}, Index: mc.Seen()}
		for _, r := range rs {
			v.Releases = append(v.Releases, r.Version)
		}
		slices.Sort(v.Releases)
		var ms []api.Member
		if _, err := mc.Do(ctx, http.MethodGet, "/v1/members", nil, &ms); err != nil {
			return view{}, err
		}
		for _, x := range ms {
			v.Members[x.ID] = x.Version + " " + x.Reason
		}
		return v, nil
	}
	var views []view
	waitFor(t, "m3 caught up: every member at the same index with the same state", time.Minute, func() bool {
		views = views[:0]
		for _, m := range c.members {
			v, err := viewOf(m)
			if err != nil {
				return false
			}
			views = append(views, v)
		}
		a, _ := json.Marshal(views[0])
		for _, v := range views[1:] {
			if b, _ := json.Marshal(v); string(a) != string(b) {
				return false
			}
		}
		return true
	})
	require.Len(t, views[0].Releases, 21)
	want := strings.TrimSpace(readFile(t, root+"/VERSION")) + " "
	require.Equal(t, map[string]string{"m1": want, "m2": want, "m3": want}, views[0].Members, "every member's list: the current release, none halted")
	t.Logf("m3 caught up at index %d; wall time %v", views[0].Index, time.Since(began).Round(time.Millisecond))
}

// memberRows is m's member list, a line a member.
func memberRows(t *testing.T, c *coordinator, m *member) string {
	t.Helper()
	ms, _, err := c.membersOf(m)
	require.NoError(t, err)
	var b strings.Builder
	for _, x := range ms {
		fmt.Fprintf(&b, "  %s leader=%v version=%q from=%q reason=%q\n", x.ID, x.Leader, x.Version, x.CapabilitiesFrom, x.Reason)
	}
	return b.String()
}
