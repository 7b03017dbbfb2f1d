// Package purity states which of molt's packages must stay pure — no I/O,
// no logging, no clock reads — and what counts as impure, so that a test
// (purity_test.go) can hold them to it.
//
// A pure package (Pure) may import the standard library's computing
// packages, other pure packages and small pure libraries. The test lists
// every package each one depends on (go list -deps) and fails on any that
// matches Deny, naming the import chain; it also parses the pure packages'
// own sources and fails on a call that reads the clock or waits on it
// (ClockFuncs), since time must come in as a value. There are no
// exemptions: every import of a pure package is followed (the last one,
// for package api, went when its HTTP client moved to api/client).
//
// To hold another package to these rules, add its import path to Pure and
// a blank import of it to this file.
//
// Layers states a second kind of rule, for molt's own packages: which of
// them a package must not depend on, so that the types of one layer (the
// REST API's wire format, the engine's structs, the coordinator's persisted
// format) never borrow another's. Among them are the API's clients —
// moltctl, api/client, the web view's server, the end-to-end tests, their
// tests included — which import no engine package: they read progress, and
// the coordinator's forecast, off the wire. The same test holds the module
// to it; a layer whose package cannot be blank-imported here (a command,
// package main) is marked Unimportable and the test reads its sources
// instead, so that go test's cache still sees a change.
package purity

import (
	"go/ast"
	"go/token"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	// Every package of Pure, imported so that go test's cache sees any
	// change to them or to what they import: the test reads them through
	// go list, a child process whose reads the cache does not record. The
	// test fails when one of Pure is missing here.
	_ "github.com/moltproject/molt/api"
	_ "github.com/moltproject/molt/api/client"
	_ "github.com/moltproject/molt/api/convert"
	_ "github.com/moltproject/molt/coordinator/statemachine"
	_ "github.com/moltproject/molt/maintenance"
	_ "github.com/moltproject/molt/maintenance/schedule"
	_ "github.com/moltproject/molt/phases"
	_ "github.com/moltproject/molt/preflight"
	_ "github.com/moltproject/molt/raftstore/command"
	_ "github.com/moltproject/molt/web"
)

// Module is molt's module path.
const Module = "github.com/moltproject/molt"

// Pure are the packages that must do no I/O: among them the coordinator's
// replicated state machine, and the log framing it registers its apply
// functions with (raftstore/command, not raftstore, which owns Raft).
var Pure = []string{
	Module + "/api",
	Module + "/api/convert",
	Module + "/phases",
	Module + "/maintenance",
	Module + "/maintenance/schedule",
	Module + "/preflight",
	Module + "/coordinator/statemachine",
	Module + "/raftstore/command",
}

// Rule denies the packages that match Pattern: "x/..." matches x and every
// package below it, "x*" every path that starts with x, anything else
// exactly that path.
type Rule struct {
	Pattern string
	// Why says what the denied packages do that a pure package must not.
	Why string
}

// Match reports whether the import path p is denied by r.
func (r Rule) Match(p string) bool {
	switch {
	case strings.HasSuffix(r.Pattern, "/..."):
		root := strings.TrimSuffix(r.Pattern, "/...")
		return p == root || strings.HasPrefix(p, root+"/")
	case strings.HasSuffix(r.Pattern, "*"):
		return strings.HasPrefix(p, strings.TrimSuffix(r.Pattern, "*"))
	}
	return p == r.Pattern
}

// Deny lists what a pure package must not depend on, directly or not. os,
// io/fs and syscall are not here: fmt and time import them. Parsing and
// encoding packages (encoding/json, net/url, net/netip) are allowed.
var Deny = []Rule{
	// The edges of molt, each behind one package.
	{"k8s.io/...", "Kubernetes API clients and types (only package kube)"},
	{"sigs.k8s.io/...", "Kubernetes client libraries (only package kube)"},
	{"github.com/hashicorp/raft*", "Raft and its log stores (only package raftstore)"},
	{"go.etcd.io/...", "bbolt and etcd clients: storage"},
	{"github.com/boltdb/...", "bolt storage"},
	{"github.com/coreos/go-systemd*", "systemd and D-Bus (only package systemd)"},
	{"github.com/godbus/...", "D-Bus"},
	{"github.com/containerd/...", "container runtime clients"},
	{"google.golang.org/api/...", "the cloud SDK (only package cloud/gce)"},
	{"cloud.google.com/go/...", "the cloud SDK"},
	{"google.golang.org/grpc/...", "RPC clients and servers"},
	{"github.com/prometheus/...", "metric registries and exporters (package metrics)"},
	// Databases.
	{"database/sql/...", "databases"},
	{"github.com/lib/pq/...", "a database driver"},
	{"github.com/jackc/...", "a database driver"},
	{"github.com/go-sql-driver/...", "a database driver"},
	{"github.com/mattn/go-sqlite3/...", "a database driver"},
	{"modernc.org/sqlite/...", "a database driver"},
	// The network, processes and signals.
	{"net", "sockets and DNS"},
	{"net/http/...", "an HTTP client or server"},
	{"net/rpc/...", "RPC"},
	{"net/smtp", "mail"},
	{"crypto/tls", "TLS connections"},
	{"os/exec", "running programs"},
	{"os/signal", "process signals"},
	{"plugin", "loading code at run time"},
	// Log output: pure code returns values and errors; the edges log.
	{"log/...", "log output (log, log/slog, log/syslog)"},
	{"github.com/hashicorp/go-hclog/...", "log output"},
	{"github.com/go-logr/...", "log output"},
	{"github.com/sirupsen/logrus/...", "log output"},
	{"go.uber.org/zap/...", "log output"},
	// Time: pure code takes the time as a value, so the same input gives
	// the same answer on every replica (ClockFuncs covers package time).
	{Module + "/internal/clock", "the clock of the packages that do I/O"},
}

// Layer denies a package of the module (Package) every package a rule of
// Deny matches, reached directly or through others.
type Layer struct {
	Package string
	Deny    []Rule
	// Unimportable: the test cannot blank-import Package (a command,
	// package main), so it reads the Go files of Package and of every
	// package of the module Package reaches instead, which go test's
	// cache records: a change to them runs the test again.
	Unimportable bool
	// Tests holds Package's test files (in the package and _test) to
	// the rules too: their imports count as Package's.
	Tests bool
	// Tags are the build tags to list Package with (e2e's tests are
	// built with -tags e2e).
	Tags []string
	// Opaque are packages of the module the walk does not enter: Package
	// may import them whatever they import, since they are edges that
	// speak the engine's types by design (kube, the Kubernetes client the
	// coordinator shares); Package's own code must not.
	Opaque []string
}

// engineDeny is what a client of the REST API must not import: it reads
// the wire (package api) and nothing of the engine or the coordinator, so
// that the coordinator's reading of an upgrade (its InProgress, Failing,
// each node's Step, its Forecast) is the only one a client shows.
var engineDeny = []Rule{
	{Module + "/phases/...", "the engine: a client reads progress off the wire (api.Upgrade's inProgress, failing, nodes' step, forecast)"},
	{Module + "/maintenance/...", "the maintenance engine and its scheduler: a client reads the wire's maintenance types"},
	{Module + "/preflight/...", "the preflight engine: a client reads the wire's preflight report"},
	{Module + "/coordinator/...", "the coordinator: clients of the API import nothing of it"},
	{Module + "/api/convert", "the package that joins wire and engine (it imports the engine)"},
}

// Layers keep molt's three kinds of types apart. The wire types (api) are
// a contract with operators' tools and must not move when the engine
// (phases) changes its structs, so api depends on neither the engine nor
// the coordinator; the engine knows neither the wire nor the coordinator's
// persisted format. The one package that joins wire and engine is
// api/convert; the coordinator's persisted types live in its state
// machine. Each package here is blank-imported by this file, as Pure's are,
// but for the Unimportable ones.
//
// The API's clients — moltctl, the Go client, the end-to-end tests, the web
// view's server — import no engine package (engineDeny): they read
// progress, and the coordinator's forecast, off the wire.
var Layers = []Layer{
	{Package: Module + "/api", Deny: []Rule{
		{Module + "/phases/...", "the engine: the wire format must not change when the engine's structs do (convert in api/convert)"},
		{Module + "/preflight/...", "the preflight engine: its report reaches the wire through api/convert"},
		{Module + "/maintenance/...", "the maintenance engine"},
		{Module + "/coordinator/...", "the coordinator: clients of the API import nothing of it"},
	}},
	{Package: Module + "/phases", Deny: []Rule{
		{Module + "/api/...", "the wire types: the engine takes and returns its own"},
		{Module + "/coordinator/...", "the coordinator and its persisted format"},
	}},
	{Package: Module + "/preflight", Deny: []Rule{
		{Module + "/api/...", "the wire types: the checks read their own (api/convert builds the catalog entry, writes the host operations and reads their results)"},
		{Module + "/coordinator/...", "the coordinator and its persisted format"},
	}},
	{Package: Module + "/maintenance", Deny: []Rule{
		{Module + "/api/...", "the wire types: the policy's wire twin is api.MaintenancePolicy (convert in api/convert)"},
		{Module + "/coordinator/...", "the coordinator and its persisted format"},
	}},
	{Package: Module + "/cmd/moltctl", Unimportable: true, Tests: true, Deny: engineDeny},
	{Package: Module + "/api/client", Tests: true, Deny: engineDeny},
	{Package: Module + "/web", Tests: true, Deny: engineDeny},
	{Package: Module + "/e2e", Unimportable: true, Tests: true, Tags: []string{"e2e"}, Deny: engineDeny,
		Opaque: []string{Module + "/kube"}},
}

// LayerViolations walks imports (import path → its imports) breadth first
// from l.Package and returns each package it reaches that a rule of l
// denies, with a shortest chain, ordered by the denied package's path.
func LayerViolations(imports map[string][]string, l Layer) []Violation {
	if len(l.Opaque) > 0 {
		imports = maps.Clone(imports)
		for _, p := range l.Opaque {
			delete(imports, p)
		}
	}
	return walk(imports, l.Package, func(p string) (Rule, bool) {
		for _, r := range l.Deny {
			if r.Match(p) {
				return r, true
			}
		}
		return Rule{}, false
	})
}

// ClockFuncs are the functions of package time that read the clock or wait
// on it. A pure package takes the time as a value (or a Clock) instead.
var ClockFuncs = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// Denied returns the first rule that denies p.
func Denied(p string) (Rule, bool) {
	for _, r := range Deny {
		if r.Match(p) {
			return r, true
		}
	}
	return Rule{}, false
}

// Violation is a denied package that a pure package, or a Layer's
// package, reaches.
type Violation struct {
	// Chain is the import path from that package to the denied one, both
	// included: a shortest one.
	Chain []string
	Rule  Rule
}

func (v Violation) String() string {
	return strings.Join(v.Chain, " → ") + ": " + v.Rule.Why
}

// Violations walks imports (import path → its imports) breadth first from
// root and returns each denied package it reaches, with a shortest chain,
// ordered by the denied package's path. The walk does not continue past a
// denied package.
func Violations(imports map[string][]string, root string) []Violation {
	return walk(imports, root, Denied)
}

// walk is Violations with the rule that denies a package as a function.
func walk(imports map[string][]string, root string, denied func(string) (Rule, bool)) []Violation {
	parent := map[string]string{root: ""}
	queue := []string{root}
	var out []Violation
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if r, ok := denied(p); ok {
			var chain []string
			for q := p; q != ""; q = parent[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			out = append(out, Violation{Chain: chain, Rule: r})
			continue
		}
		for _, q := range imports[p] {
			if _, seen := parent[q]; !seen {
				parent[q] = p
				queue = append(queue, q)
			}
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return strings.Compare(a.Chain[len(a.Chain)-1], b.Chain[len(b.Chain)-1])
	})
	return out
}

// ClockCalls returns the positions and names ("time.Now") of the uses of
// ClockFuncs in f, under whatever name f imports package time. A dot
// import of time counts as a use: it hides every such call.
func ClockCalls(fset *token.FileSet, f *ast.File) []string {
	names := map[string]bool{}
	var out []string
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			names["time"] = true
		case imp.Name.Name == ".":
			out = append(out, fset.Position(imp.Pos()).String()+": dot import of time")
		case imp.Name.Name != "_":
			names[imp.Name.Name] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		// A local variable that shadows the package name would be taken
		// for it; pure code has no reason to shadow time.
		if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] && slices.Contains(ClockFuncs, sel.Sel.Name) {
			out = append(out, fset.Position(sel.Pos()).String()+": time."+sel.Sel.Name)
		}
		return true
	})
	return out
}

// Untagged are the engine's packages, whose types are never encoded as
// they are: the REST API encodes its wire twins (package api, converted in
// api/convert) and the coordinator persists its own (the …V1 types of
// coordinator/statemachine). A JSON tag there would describe a format
// nothing reads, and invite the next change to encode the engine's
// structs after all; so they carry none, and the test finds any.
var Untagged = []string{
	Module + "/phases",
	Module + "/preflight",
	Module + "/maintenance",
	Module + "/maintenance/schedule",
}

// EncodingKeys are the struct tag keys that make a type a format.
var EncodingKeys = []string{"json", "yaml", "xml"}

// EncodingTags returns the positions and tags of the struct fields in f
// whose tag has a key of EncodingKeys.
func EncodingTags(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		field, ok := n.(*ast.Field)
		if !ok || field.Tag == nil {
			return true
		}
		tag, err := strconv.Unquote(field.Tag.Value)
		if err != nil {
			return true
		}
		for _, key := range EncodingKeys {
			if _, ok := reflect.StructTag(tag).Lookup(key); ok {
				out = append(out, fset.Position(field.Tag.Pos()).String()+": "+field.Tag.Value)
				break
			}
		}
		return true
	})
	return out
}
