package purity_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moltproject/molt/internal/purity"
	"github.com/stretchr/testify/require"
)

// impure are packages known to do I/O; the deny list must catch each.
var impure = map[string]string{
	purity.Module + "/kube":      "k8s.io/",
	purity.Module + "/raftstore": "github.com/hashicorp/raft",
}

// goPackage is the part of go list's answer the tests read.
type goPackage struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Imports      []string
	TestGoFiles  []string
	XTestGoFiles []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// goList runs go list -deps on patterns and returns every package found,
// by import path. go test puts its own go first on PATH.
func goList(t *testing.T, patterns ...string) map[string]goPackage {
	t.Helper()
	return goListTags(t, nil, patterns...)
}

// goListTags is goList with build tags.
func goListTags(t *testing.T, tags []string, patterns ...string) map[string]goPackage {
	t.Helper()
	args := []string{"list", "-deps", "-e", "-json=ImportPath,Dir,GoFiles,Imports,TestGoFiles,XTestGoFiles,TestImports,XTestImports,Error"}
	if len(tags) > 0 {
		args = append(args, "-tags="+strings.Join(tags, ","))
	}
	args = append(args, patterns...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Nil(t, p.Error, "go list %s: %+v", p.ImportPath, p.Error)
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func importGraph(pkgs map[string]goPackage) map[string][]string {
	g := make(map[string][]string, len(pkgs))
	for path, p := range pkgs {
		g[path] = p.Imports
	}
	return g
}

// TestPureImports fails when a pure package depends, directly or through
// other packages, on one the deny list names, and shows the import chain.
// It loads the known impure packages in the same go list, and fails when
// the deny list does not catch each of them (a test that cannot fail
// proves nothing).
func TestPureImports(t *testing.T) {
	patterns := slices.Clone(purity.Pure)
	for p := range impure {
		patterns = append(patterns, p)
	}
	self := purity.Module + "/internal/purity"
	pkgs := goList(t, append(patterns, self)...)
	graph := importGraph(pkgs)

	t.Run("self-check: the pure packages are in the test binary", func(t *testing.T) {
		for _, root := range purity.Pure {
			require.Contains(t, pkgs[self].Imports, root, "blank-import %s in purity.go, or go test may replay a cached pass after it changed", root)
		}
	})

	for _, root := range purity.Pure {
		t.Run(strings.TrimPrefix(root, purity.Module+"/"), func(t *testing.T) {
			require.Contains(t, pkgs, root, "pure package not found")
			var msgs []string
			for _, v := range purity.Violations(graph, root) {
				msgs = append(msgs, v.String())
			}
			require.Empty(t, msgs, "%s depends on I/O packages:\n%s", root, strings.Join(msgs, "\n"))
		})
	}

	t.Run("self-check: known impure packages are caught", func(t *testing.T) {
		for pkg, want := range impure {
			vs := purity.Violations(graph, pkg)
			require.NotEmpty(t, vs, "the deny list lets %s through", pkg)
			found := false
			for _, v := range vs {
				found = found || strings.HasPrefix(v.Chain[len(v.Chain)-1], want)
			}
			require.True(t, found, "%s: no violation under %s in %v", pkg, want, vs)
		}
	})
}

// TestLayers fails when a package of Layers depends, directly or through
// others, on a package of the module its layer denies, and shows the
// import chain. Its self-checks: each layer's package is in the test binary
// (for go test's cache) or, for a command, its sources are read; and the
// rules catch api/convert, which joins wire and engine by design, so they
// are known to bite.
func TestLayers(t *testing.T) {
	joiner := purity.Module + "/api/convert"
	self := purity.Module + "/internal/purity"
	patterns := []string{joiner, self}
	for _, l := range purity.Layers {
		if len(l.Tags) == 0 {
			patterns = append(patterns, l.Package)
		}
	}
	pkgs := goList(t, patterns...)

	t.Run("self-check: the layers' packages are in the test binary", func(t *testing.T) {
		for _, l := range purity.Layers {
			if !l.Unimportable {
				require.Contains(t, pkgs[self].Imports, l.Package, "blank-import %s in purity.go, or mark its layer Unimportable", l.Package)
			}
		}
	})
	for _, l := range purity.Layers {
		t.Run(strings.TrimPrefix(l.Package, purity.Module+"/"), func(t *testing.T) {
			layerPkgs := pkgs
			if len(l.Tags) > 0 {
				layerPkgs = goListTags(t, l.Tags, l.Package)
			}
			require.Contains(t, layerPkgs, l.Package, "layer package not found")
			graph := layerGraph(t, layerPkgs, l)
			var msgs []string
			for _, v := range purity.LayerViolations(graph, l) {
				msgs = append(msgs, v.String())
			}
			require.Empty(t, msgs, "%s depends on another layer:\n%s", l.Package, strings.Join(msgs, "\n"))
		})
	}
	t.Run("self-check: the wire's rules catch the package that converts", func(t *testing.T) {
		api := purity.Layers[0]
		require.Equal(t, purity.Module+"/api", api.Package)
		phases := purity.Module + "/phases"
		var chain []string
		vs := purity.LayerViolations(importGraph(pkgs), purity.Layer{Package: joiner, Deny: api.Deny})
		for _, v := range vs {
			if v.Chain[len(v.Chain)-1] == phases {
				chain = v.Chain
			}
		}
		require.Equal(t, []string{joiner, phases}, chain, "api/convert imports phases directly: %v", vs)
	})
}

// layerGraph is the import graph of pkgs for l: with l.Tests, the imports
// of l.Package's tests count as its own (and what they reach is listed
// too). For an Unimportable layer it reads the Go files (and directories)
// of every package of the module that l.Package reaches, so that go
// test's cache sees a change to them, as it would if they were imported.
func layerGraph(t *testing.T, pkgs map[string]goPackage, l purity.Layer) map[string][]string {
	t.Helper()
	root := pkgs[l.Package]
	if l.Tests {
		var extra []string
		for _, imp := range slices.Concat(root.TestImports, root.XTestImports) {
			if _, ok := pkgs[imp]; !ok && imp != l.Package {
				extra = append(extra, imp)
			}
		}
		if len(extra) > 0 {
			pkgs = maps.Clone(pkgs)
			maps.Copy(pkgs, goListTags(t, l.Tags, extra...))
		}
	}
	graph := importGraph(pkgs)
	if l.Tests {
		imports := slices.Concat(root.Imports, root.TestImports, root.XTestImports)
		imports = slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(imports))), func(p string) bool { return p == l.Package })
		graph[l.Package] = imports
	}
	if l.Unimportable || l.Tests {
		readSources(t, pkgs, graph, l)
	}
	return graph
}

// readSources reads the Go files of l.Package (its tests too, with
// l.Tests) and, for an Unimportable layer, those of every package of the
// module it reaches: go test records the files a test opens and replays
// a cached pass only while they are unchanged.
func readSources(t *testing.T, pkgs map[string]goPackage, graph map[string][]string, l purity.Layer) {
	t.Helper()
	read := func(p goPackage, files ...[]string) {
		_, err := os.ReadDir(p.Dir) // a file added or removed
		require.NoError(t, err)
		for _, name := range slices.Concat(files...) {
			_, err := os.ReadFile(filepath.Join(p.Dir, name))
			require.NoError(t, err)
		}
	}
	root := pkgs[l.Package]
	read(root, root.GoFiles, root.TestGoFiles, root.XTestGoFiles)
	if !l.Unimportable {
		return
	}
	seen := map[string]bool{l.Package: true}
	queue := slices.Clone(graph[l.Package])
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] || !strings.HasPrefix(p, purity.Module+"/") {
			continue
		}
		seen[p] = true
		read(pkgs[p], pkgs[p].GoFiles)
		queue = append(queue, graph[p]...)
	}
}

// TestPureNoClock fails when a pure package's own code (tests aside) reads
// the clock or waits on it: time comes in as data (Nomad lints its FSM the
// same way).
func TestPureNoClock(t *testing.T) {
	for root, calls := range scanPackages(t, purity.Pure, purity.ClockCalls) {
		require.Empty(t, calls, "%s reads the clock; take the time as a value instead", root)
	}
}

// scanPackages runs scan over the own (non-test) sources of each of roots
// and returns what it found, by package.
func scanPackages(t *testing.T, roots []string, scan func(*token.FileSet, *ast.File) []string) map[string][]string {
	t.Helper()
	pkgs := goList(t, roots...)
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, root := range roots {
		p := pkgs[root]
		require.NotEmpty(t, p.GoFiles, root)
		out[root] = nil
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			out[root] = append(out[root], scan(fset, f)...)
		}
	}
	return out
}

// scanSource runs scan over src as the file x.go.
func scanSource(t *testing.T, src string, scan func(*token.FileSet, *ast.File) []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	return scan(fset, f)
}

// TestClockCalls is the clock scan's self-check: it finds clock reads
// under any import name and ignores look-alikes.
func TestClockCalls(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"time.Now", "package x\nimport \"time\"\nvar _ = time.Now()\n", []string{"x.go:3:9: time.Now"}},
		{"renamed import", "package x\nimport clock \"time\"\nfunc f() { clock.Sleep(1); _ = clock.Since(clock.Time{}) }\n",
			[]string{"x.go:3:12: time.Sleep", "x.go:3:32: time.Since"}},
		{"dot import", "package x\nimport . \"time\"\nvar _ = Now()\n", []string{"x.go:2:8: dot import of time"}},
		{"time as a value is fine", "package x\nimport \"time\"\nfunc f(now time.Time) time.Time { return now.Add(time.Second) }\n", nil},
		{"no time import", "package x\ntype c struct{ Now int }\nvar time c\nvar _ = time.Now\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, scanSource(t, tc.src, purity.ClockCalls))
		})
	}
}

// TestRuleMatch pins the pattern forms of the deny list.
func TestRuleMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"net", "net", true},
		{"net", "net/netip", false},
		{"net/http/...", "net/http", true},
		{"net/http/...", "net/http/httptrace", true},
		{"net/http/...", "net/httpx", false},
		{"github.com/hashicorp/raft*", "github.com/hashicorp/raft-boltdb/v2", true},
		{"log/...", "log/slog", true},
		{"log/...", "logger", false},
	} {
		require.Equal(t, tc.want, purity.Rule{Pattern: tc.pattern}.Match(tc.path), "%s ~ %s", tc.pattern, tc.path)
	}
}

// TestEngineTypesUntagged fails when a type of an Untagged package (tests
// aside) carries an encoding tag: what is encoded is its twin in api or in
// the state machine's persisted format.
func TestEngineTypesUntagged(t *testing.T) {
	for root, tags := range scanPackages(t, purity.Untagged, purity.EncodingTags) {
		require.Empty(t, tags, "%s carries encoding tags; encode its wire twin (api) or persisted twin (coordinator/statemachine) instead", root)
	}
}

// TestEncodingTags is the tag scan's self-check.
func TestEncodingTags(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"json", "package x\ntype T struct{ A int `json:\"a\"` }\n", []string{"x.go:2:22: `json:\"a\"`"}},
		{"among others", "package x\ntype T struct{ A int `db:\"a\" yaml:\"a,omitempty\"` }\n", []string{"x.go:2:22: `db:\"a\" yaml:\"a,omitempty\"`"}},
		{"nested struct", "package x\nvar v struct{ A struct{ B int `xml:\"b\"` } }\n", []string{"x.go:2:31: `xml:\"b\"`"}},
		{"other keys are fine", "package x\ntype T struct{ A int `db:\"a\"`; B int }\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, scanSource(t, tc.src, purity.EncodingTags))
		})
	}
}
