package maintenance

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPolicyWireShape(t *testing.T) {
	body := `{"window":{"start":"2026-01-10T03:00:00+01:00","end":"2026-01-10T09:00:00+01:00","recurrence":"FREQ=WEEKLY;BYDAY=SA,SU"},` +
		`"exclusions":[{"name":"freeze","start":"2026-02-01T00:00:00Z","end":"2026-02-05T00:00:00Z"},` +
		`{"name":"minor","start":"2026-02-01T00:00:00Z","end":"2026-03-01T00:00:00Z","scope":"no_minor_upgrades"}]}`
	var p Policy
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	out, err := json.Marshal(Normalize(p))
	require.NoError(t, err)
	require.JSONEq(t, `{"window":{"start":"2026-01-10T02:00:00Z","end":"2026-01-10T08:00:00Z","recurrence":"FREQ=WEEKLY;BYDAY=SA,SU"},`+
		`"exclusions":[{"name":"freeze","start":"2026-02-01T00:00:00Z","end":"2026-02-05T00:00:00Z","scope":"no_upgrades"},`+
		`{"name":"minor","start":"2026-02-01T00:00:00Z","end":"2026-03-01T00:00:00Z","scope":"no_minor_upgrades"}]}`, string(out))
	empty, err := json.Marshal(Policy{})
	require.NoError(t, err)
	require.Equal(t, `{}`, string(empty))
}

func TestNormalizeIsIdempotent(t *testing.T) {
	p := Policy{
		Window:     &Window{Start: time.Date(2026, 1, 1, 1, 2, 3, 456, time.FixedZone("X", -7200)), End: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), Recurrence: "RRULE:FREQ=DAILY"},
		Exclusions: []Exclusion{{Name: "a", Start: t0, End: t0.Add(day)}},
	}
	once := Normalize(p)
	require.Equal(t, once, Normalize(once))
}

func TestCompiledPolicyIsACopy(t *testing.T) {
	c := mustCompile(t, Policy{Window: &Window{Start: t0, End: t0.Add(day), Recurrence: "FREQ=DAILY"}, Exclusions: []Exclusion{{Name: "a", Start: t0, End: t0.Add(day)}}})
	got := c.Policy()
	got.Exclusions[0].End = t0.Add(100 * day)
	got.Window.End = t0.Add(time.Hour)
	require.Equal(t, t0.Add(day), c.Policy().Exclusions[0].End)
	require.Equal(t, t0.Add(day), c.Policy().Window.End)
	require.False(t, c.Allowed(cpPatch, t0.Add(2*time.Hour)).Allowed)
}
