package filltest_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/filltest"
)

type inner struct {
	Text  string
	Count *int
}

type outer struct {
	Flag    bool
	When    time.Time
	Took    time.Duration
	Version string
	Items   []inner
	ByName  map[string]inner
	Special special
	hidden  int
}

type special struct{ A, B int }

func TestFillReachesEveryExportedField(t *testing.T) {
	f := &filltest.Filler{
		Types: map[reflect.Type]func(int) any{reflect.TypeFor[special](): func(n int) any { return special{A: 1, B: n} }},
		Fields: func(name string, n int) (string, bool) {
			return "1.2.3", name == "Version"
		},
	}
	v := filltest.New[outer](f)
	require.True(t, v.Flag)
	require.True(t, v.When.After(filltest.Base))
	require.NotZero(t, v.Took)
	require.Equal(t, "1.2.3", v.Version, "Fields decides named string fields")
	require.Len(t, v.Items, 2)
	require.NotEqual(t, v.Items[0].Text, v.Items[1].Text, "no two leaves share a value")
	require.NotNil(t, v.Items[1].Count)
	require.Len(t, v.ByName, 1)
	require.Equal(t, 1, v.Special.A, "Types decides whole values of a type")
	require.Zero(t, v.hidden, "unexported fields are left alone")
}

func TestFillRefusesWhatItCannotFill(t *testing.T) {
	require.Panics(t, func() { filltest.New[struct{ F func() }](&filltest.Filler{}) })
	require.Panics(t, func() { (&filltest.Filler{}).Fill(outer{}) })
}

// TestFillDependsOnPathsOnly: a field added to a type changes no other
// field's value, so golden files of filled values only grow.
func TestFillDependsOnPathsOnly(t *testing.T) {
	type before struct{ A, C string }
	type after struct{ A, B, C string }
	b := filltest.New[before](&filltest.Filler{})
	a := filltest.New[after](&filltest.Filler{})
	require.Equal(t, b.A, a.A)
	require.Equal(t, b.C, a.C)
	require.Equal(t, b, filltest.New[before](&filltest.Filler{}), "filling is deterministic")
}
