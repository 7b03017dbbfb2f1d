package statemachine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// sharedByDesign are the unexported fields a copy may share with its
// original; the test cannot fill unexported fields, so every other one
// that holds a reference fails it until it is listed here with the
// reason it is safe.
var sharedByDesign = map[string]string{
	// BuildIndex makes new maps and nothing changes them in place; a copy
	// keeps the order of Nodes, Steps and Pools, so the indexes hold.
	"phases.Upgrade.nodeIdx": "read-only once built",
	"phases.Upgrade.stepIdx": "read-only once built",
	"phases.Upgrade.poolIdx": "read-only once built",
}

// copyCase checks one copy helper: fed a value whose every field is set,
// it returns an equal value (but for what it leaves out on purpose, which
// leaveOut clears) that shares no memory with the original.
type copyCase struct {
	helper string // the function under test, as declared
	run    func(t *testing.T)
}

func checkCopy[T any](helper string, copyOf func(*T) T, leaveOut func(*T)) copyCase {
	return copyCase{helper: helper, run: func(t *testing.T) {
		orig, want, expect := new(T), new(T), new(T)
		for _, v := range []*T{orig, want, expect} {
			fillAll(t, v)
		}
		if leaveOut != nil {
			leaveOut(expect)
		}
		cp := copyOf(orig)
		require.Equal(t, *expect, cp, "the copy differs from the original")

		// No reference in the copy leads where one in the original does.
		var shared []string
		sharedMemory(reflect.ValueOf(orig).Elem(), reflect.ValueOf(&cp).Elem(), reflect.TypeFor[T]().String(), &shared)
		require.Empty(t, shared, "the copy shares memory with the original")

		// And so changing every field reachable from the copy, in place,
		// leaves the original as it was filled.
		mutate(reflect.ValueOf(&cp).Elem())
		require.Equal(t, *want, *orig, "changing the copy changed the original")
		require.NotEqual(t, *want, cp, "the mutation changed nothing: the check above proves nothing")
	}}
}

// TestCopiesShareNoMemory holds every copy helper of the package to what
// the queries and Precheck promise: a copy, however deeply changed, never
// changes the state, and the state, however changed by apply functions,
// never changes a copy. Values are filled by reflection, so a field added
// to any record later is filled and checked without touching this test.
func TestCopiesShareNoMemory(t *testing.T) {
	cases := []copyCase{
		checkCopy("copyCluster", func(r *ClusterRecord) ClusterRecord { return copyCluster(r) },
			func(r *ClusterRecord) { r.Preflights = nil }), // Cluster leaves the runs out
		checkCopy("copySpec", func(s *phases.ClusterSpec) phases.ClusterSpec { return copySpec(*s) }, nil),
		checkCopy("copyPool", func(p *phases.Pool) phases.Pool { return copyPool(*p) }, nil),
		checkCopy("copyUpgrade", func(u *phases.Upgrade) phases.Upgrade { return *copyUpgrade(u) }, nil),
		checkCopy("copyPoolTrack", func(p *phases.PoolTrack) phases.PoolTrack { return copyPoolTrack(*p) }, nil),
		checkCopy("copyNodeTasks", func(n *[]phases.NodeTask) []phases.NodeTask { return copyNodeTasks(*n) }, nil),
		checkCopy("copyNodeTask", func(n *phases.NodeTask) phases.NodeTask { return copyNodeTask(n) }, nil),
		checkCopy("copyNodeSteps", func(s *[]phases.NodeStep) []phases.NodeStep { return copyNodeSteps(*s) }, nil),
		checkCopy("copyAgent", func(a *AgentRecord) AgentRecord { return copyAgent(a) }, nil),
		checkCopy("copyPolicy", func(p *maintenance.Policy) maintenance.Policy { return *copyPolicy(p) }, nil),
		checkCopy("copyAuto", func(a *schedule.State) schedule.State { return copyAuto(*a) }, nil),
		checkCopy("copyPreflight", func(p *PreflightRun) PreflightRun { return copyPreflight(p) }, nil),
		checkCopy("copyOperation", func(o *api.Operation) api.Operation { return copyOperation(*o) }, nil),
		checkCopy("copyOperationResult", func(r *api.OperationResult) api.OperationResult { return copyOperationResult(*r) }, nil),
		checkCopy("copyReport", func(r *preflight.Report) preflight.Report { return *copyReport(r) }, nil),
		checkCopy("copyRelease", func(r *api.Release) api.Release { return copyRelease(r) }, nil),
	}
	for _, c := range cases {
		t.Run(c.helper, c.run)
	}

	// A helper added later without a case here fails the test.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.helper] = true
	}
	require.Equal(t, copyHelpers(t), slices.Sorted(maps.Keys(covered)), "every copy helper of the package has a case here")

	t.Run("nil", func(t *testing.T) {
		require.Nil(t, copyUpgrade(nil))
		require.Nil(t, copyPolicy(nil))
		require.Nil(t, copyReport(nil))
		require.Nil(t, copyNodeTasks(nil))
		require.Nil(t, copyNodeSteps(nil))
		var r ClusterRecord
		require.Equal(t, ClusterRecord{}, copyCluster(&r))
	})
}

// copyHelpers lists the package's functions named copy… (copy.go's
// helpers, and any declared elsewhere), sorted.
func copyHelpers(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "copy") {
				out = append(out, fn.Name.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// fillAll sets every exported field reachable from v to a non-zero value:
// two elements in every slice and map, every pointer set. Values are the
// same on every call, so two fills are equal and share nothing.
func fillAll[T any](t *testing.T, v *T) {
	t.Helper()
	n := 0
	fill(t, reflect.ValueOf(v).Elem(), reflect.TypeFor[T]().String(), &n)
}

var timeType = reflect.TypeFor[time.Time]()

func fill(t *testing.T, v reflect.Value, path string, n *int) {
	t.Helper()
	if strings.Count(path, ".") > 30 {
		t.Fatalf("%s: too deep; is the type recursive?", path)
	}
	*n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(*n) * time.Minute)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path, n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), n)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			fill(t, k, path+"{key}", n)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, path+"{}", n)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(t, v.Field(i), path+"."+f.Name, n)
			}
		}
		if u, ok := v.Addr().Interface().(*phases.Upgrade); ok {
			u.BuildIndex() // as conversions and NewUpgrade leave it
		}
	default:
		t.Fatalf("%s: cannot fill a %s; teach fill", path, v.Kind())
	}
}

// sharedMemory appends to out the path of every pointer, map or slice
// backing array that a (the original) and b (the copy) share.
func sharedMemory(a, b reflect.Value, path string, out *[]string) {
	if a.Type() == timeType {
		return // its location pointer is shared and never written
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.Pointer() == b.Pointer() {
			*out = append(*out, path+" (pointer)")
			return
		}
		sharedMemory(a.Elem(), b.Elem(), path, out)
	case reflect.Slice:
		if overlap(a, b) {
			*out = append(*out, path+" (slice backing array)")
			return
		}
		for i := range min(a.Len(), b.Len()) {
			sharedMemory(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Array:
		for i := range a.Len() {
			sharedMemory(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return
		}
		if a.UnsafePointer() == b.UnsafePointer() {
			*out = append(*out, path+" (map)")
			return
		}
		it := a.MapRange()
		for it.Next() {
			if e := b.MapIndex(it.Key()); e.IsValid() {
				sharedMemory(it.Value(), e, fmt.Sprintf("%s{%v}", path, it.Key()), out)
			}
		}
	case reflect.Interface:
		if !a.IsNil() && !b.IsNil() {
			sharedMemory(a.Elem(), b.Elem(), path, out)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			p := path + "." + f.Name
			if !f.IsExported() {
				if holdsReference(f.Type) && sharedByDesign[a.Type().String()+"."+f.Name] == "" {
					*out = append(*out, p+" (unexported: the test cannot fill it; copy it, or list it in sharedByDesign)")
				}
				continue
			}
			sharedMemory(a.Field(i), b.Field(i), p, out)
		}
	}
}

// overlap reports whether two slices' backing arrays, up to their
// capacities, share any byte.
func overlap(a, b reflect.Value) bool {
	if a.Cap() == 0 || b.Cap() == 0 {
		return false
	}
	size := a.Type().Elem().Size()
	if size == 0 {
		return false
	}
	a0, b0 := a.Pointer(), b.Pointer()
	return a0 < b0+uintptr(b.Cap())*size && b0 < a0+uintptr(a.Cap())*size
}

// holdsReference reports whether a value of type t can lead to memory
// outside itself (strings aside: they are never written).
func holdsReference(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return holdsReference(t.Elem())
	case reflect.Struct:
		if t == timeType {
			return false
		}
		for i := range t.NumField() {
			if holdsReference(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// mutate changes, in place, every exported field reachable from v (which
// must be addressable): through pointers and into slices' elements and
// maps' entries, never by replacing a reference.
func mutate(v reflect.Value) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1000)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1000)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1000)
	case reflect.String:
		v.SetString(v.String() + "~")
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			mutate(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutate(e)
			v.SetMapIndex(k, e)
		}
	case reflect.Interface:
		// None in the records; sharedMemory looks into them.
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutate(v.Field(i))
			}
		}
	}
}
