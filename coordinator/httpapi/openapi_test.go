package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// docs/openapi.yaml is the API's machine-readable contract. The tests in
// this file hold it to the code: the route table (routes.go) and the
// document list the same routes, with the same roles; every problem
// problemFor answers is documented under its status; the wire golden
// files (api/testdata/wire) are valid against the schemas of the routes
// that carry them; and every request moltctl, the agent, a joining member
// and the web view make is to a documented route.

var updateOpenAPI = flag.Bool("update", false, "rewrite the generated schemas of docs/openapi.yaml")

const openAPIPath = "../../docs/openapi.yaml"

// allRoutes is the route table with every optional route served: the web
// view, /metrics and /artifacts.
func allRoutes(t *testing.T) []route {
	cfg := Config{Gatherer: prometheus.NewRegistry(), ArtifactDir: t.TempDir()}
	return (&handlers{cfg: cfg}).routes()
}

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(openAPIPath)
	require.NoError(t, err)
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.NoError(t, doc.Validate(context.Background()), "docs/openapi.yaml is not a valid OpenAPI document")
	return doc
}

// TestOpenAPI: the document is valid OpenAPI 3.1, its schemas are what
// package api encodes, and it lists exactly the routes of the route
// table with their roles and the problems every route may answer.
func TestOpenAPI(t *testing.T) {
	t.Run("schemas", func(t *testing.T) {
		text, err := os.ReadFile(openAPIPath)
		require.NoError(t, err)
		at := bytes.Index(text, []byte(schemaMarker))
		require.NotEqual(t, -1, at, "docs/openapi.yaml lost its marker %q", schemaMarker)
		want, err := schemaYAML("../../api", wireBodies)
		require.NoError(t, err)
		if *updateOpenAPI {
			require.NoError(t, os.WriteFile(openAPIPath, append(text[:at:at], want...), 0o644))
			text, _ = os.ReadFile(openAPIPath)
		}
		require.Equal(t, string(want), string(text[at:]), "the schemas of docs/openapi.yaml are not package api's: run go test ./coordinator/httpapi -run TestOpenAPI -update")
	})
	doc := loadOpenAPI(t)
	t.Run("routes", func(t *testing.T) {
		rs := allRoutes(t)
		require.Empty(t, compareRoutes(rs, doc), "docs/openapi.yaml and the route table (routes.go) differ")
		t.Logf("%d routes documented", len(rs))
	})
}

// TestOpenAPINamesAnUndocumentedRoute: a route added to the table without
// being documented, or documented with another role, fails TestOpenAPI
// naming it; so does a documented operation that no route serves.
func TestOpenAPINamesAnUndocumentedRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	rs := allRoutes(t)
	added := append(slices.Clone(rs), route{method: "POST", pattern: "/v1/clusters/{name}/pause", need: NeedOperator})
	require.Equal(t, []string{"POST /v1/clusters/{name}/pause: in the route table, not in docs/openapi.yaml"}, compareRoutes(added, doc))

	var moved []route
	for _, rt := range rs {
		if rt.method == "DELETE" && rt.pattern == "/v1/tokens/{id}" {
			rt.need = NeedOperator
		}
		if rt.method == "GET" && rt.pattern == "/v1/members" {
			continue
		}
		moved = append(moved, rt)
	}
	require.Equal(t, []string{
		"DELETE /v1/tokens/{id}: the route needs operator, docs/openapi.yaml says x-molt-role admin",
		"GET /v1/members: in docs/openapi.yaml, no route serves it",
	}, compareRoutes(moved, doc))
}

// specOp is one operation of the document.
type specOp struct {
	path     string
	wildcard bool
	op       *openapi3.Operation
}

// specOps are the document's operations, keyed "METHOD path".
func specOps(doc *openapi3.T) map[string]specOp {
	out := map[string]specOp{}
	for path, item := range doc.Paths.Map() {
		wild, _ := item.Extensions["x-molt-wildcard"].(bool)
		for method, op := range item.Operations() {
			out[method+" "+path] = specOp{path: path, wildcard: wild, op: op}
		}
	}
	return out
}

var pathParam = regexp.MustCompile(`\{[^}/]*\}`)

// routeKey is how a route and an operation are matched: the method and
// the path with its parameters unnamed. A chi wildcard (/artifacts/*) is
// an operation whose path ends in a parameter and is marked
// x-molt-wildcard: OpenAPI has no parameter that spans segments.
func routeKey(method, pattern string) string {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		pattern = p + "{}"
	}
	return method + " " + pathParam.ReplaceAllString(pattern, "{}")
}

// compareRoutes lists every difference between the route table and the
// document, sorted: a route not documented, an operation no route
// serves, a role, a credential or a problem response that does not fit.
func compareRoutes(rs []route, doc *openapi3.T) []string {
	ops := map[string]specOp{}
	names := map[string]string{}
	for name, so := range specOps(doc) {
		method, path, _ := strings.Cut(name, " ")
		ops[routeKey(method, path)] = so
		names[routeKey(method, path)] = name
	}
	var diffs []string
	seen := map[string]bool{}
	for _, rt := range rs {
		name := rt.method + " " + rt.pattern
		k := routeKey(rt.method, rt.pattern)
		seen[k] = true
		so, ok := ops[k]
		if !ok {
			diffs = append(diffs, name+": in the route table, not in docs/openapi.yaml")
			continue
		}
		if wild := strings.HasSuffix(rt.pattern, "*"); wild != so.wildcard {
			diffs = append(diffs, fmt.Sprintf("%s: the route's wildcard is %v, the path's x-molt-wildcard %v", name, wild, so.wildcard))
		}
		role, _ := so.op.Extensions["x-molt-role"].(string)
		if role != rt.need.String() {
			diffs = append(diffs, fmt.Sprintf("%s: the route needs %s, docs/openapi.yaml says x-molt-role %s", name, rt.need, role))
			continue
		}
		diffs = append(diffs, checkOperation(name, rt, so.op)...)
	}
	for k, name := range names {
		if !seen[k] {
			diffs = append(diffs, name+": in docs/openapi.yaml, no route serves it")
		}
	}
	sort.Strings(diffs)
	return diffs
}

// credentials are the security schemes that can carry each role.
var credentials = map[Requirement][]string{
	Public:             nil,
	NeedViewer:         {"apiToken", "session"},
	NeedOperator:       {"apiToken", "session"},
	NeedAdmin:          {"apiToken", "session"},
	NeedAgent:          {"agentCert"},
	NeedBootstrapToken: {"bootstrapToken"},
	NeedAgentOrViewer:  {"agentCert", "apiToken", "session"},
	NeedMember:         {"memberCert"},
}

// checkOperation holds an operation to what every route of its kind
// answers: the credentials of its role, 401 and 403 where a credential is
// needed, 400, 413 and 415 where a body is read, 500 everywhere and 503
// where the request may wait for or reach the leader.
func checkOperation(name string, rt route, op *openapi3.Operation) []string {
	var diffs []string
	want := credentials[rt.need]
	if name == "POST /v1/session" {
		want = []string{"apiToken"} // a session is made from a bearer token only
	}
	var got []string
	if op.Security != nil {
		for _, req := range *op.Security {
			got = append(got, slices.Sorted(maps.Keys(req))...)
		}
	}
	if op.Security == nil || !slices.Equal(got, want) {
		diffs = append(diffs, fmt.Sprintf("%s: security %v, want %v (the credentials of %s)", name, got, want, rt.need))
	}
	need := []int{500}
	if rt.need != Public {
		need = append(need, 401, 403)
	}
	if strings.HasPrefix(rt.pattern, "/v1/") || rt.need != Public {
		need = append(need, 503)
	}
	if op.RequestBody != nil {
		need = append(need, 400, 413, 415)
	}
	for _, st := range need {
		if op.Responses.Status(st) == nil {
			diffs = append(diffs, fmt.Sprintf("%s: no %d answer", name, st))
		}
	}
	return diffs
}

// TestOpenAPIProblems: every problem type of package api is documented,
// and each problem problemFor answers is documented under its status.
func TestOpenAPIProblems(t *testing.T) {
	doc := loadOpenAPI(t)
	byStatus := map[int][]string{} // status -> documented problem types
	for name, r := range doc.Components.Responses {
		c := r.Value.Content.Get("application/problem+json")
		if c == nil {
			continue
		}
		parts := c.Schema.Value.AllOf
		require.Len(t, parts, 2, name)
		require.Equal(t, "#/components/schemas/Problem", parts[0].Ref, name)
		props := parts[1].Value.Properties
		st, ok := props["status"].Value.Const.(float64)
		require.True(t, ok, "%s: status has no const", name)
		for _, v := range props["type"].Value.Enum {
			byStatus[int(st)] = append(byStatus[int(st)], v.(string))
		}
	}
	documented := map[string]bool{}
	for _, ts := range byStatus {
		for _, typ := range ts {
			documented[strings.TrimPrefix(typ, api.ProblemTypeBase)] = true
		}
	}
	// One error of each case problemFor knows. A version rule of package
	// phases that problemFor does not rename answers its own name as the
	// problem type: those are problem types too.
	errs := []error{&phases.ValidationError{Rule: "pool-name"}}
	for _, rule := range []string{phases.RuleDowngrade, phases.RuleSame, phases.RuleSkipMinor, phases.RuleMajor,
		phases.RuleAdminSkew, phases.RuleUserAhead, phases.RuleUnknown, phases.RuleInvalid,
		phases.RuleNodesNewer, phases.RuleMixedSkew} {
		errs = append(errs, &phases.RuleError{Rule: rule})
	}
	errs = append(errs,
		phases.ErrInvalidVersion, errBadRequest, errTooLarge, errMediaType,
		coordinator.ErrUnknownVersion, coordinator.ErrNotFound, coordinator.ErrUpgradeInProgress,
		coordinator.ErrNoUpgrade, coordinator.ErrCommandNotAllowed, coordinator.ErrUnauthorized,
		coordinator.ErrForbidden, coordinator.ErrConflict, coordinator.ErrInvalid,
		coordinator.ErrPolicyInvalid, phases.ErrStale, errLagging{}, errLagging{credential: true},
		raftstore.ErrNotLeader, raftstore.ErrLeaderNotFound, errNoLeader, raftstore.ErrTimeout,
		raftstore.ErrLeadershipLost, raftstore.ErrClosed, errTooManyPolls, errTooManySessions,
		errors.New("anything else"),
	)
	answered := map[string]bool{}
	for _, err := range errs {
		p := problemFor(err)
		require.Contains(t, byStatus[p.Status], p.Type, "problemFor(%v) answers %d %s: document it under %d", err, p.Status, p.Suffix(), p.Status)
		answered[p.Suffix()] = true
	}
	consts := problemConstants(t)
	require.NotEmpty(t, consts)
	for _, s := range consts {
		require.True(t, documented[s], "problem type %q (api/problem.go) is not in docs/openapi.yaml", s)
		answered[s] = true
	}
	for s := range documented {
		require.True(t, answered[s], "docs/openapi.yaml documents problem type %q, which the API does not answer", s)
	}
	require.Contains(t, byStatus[http.StatusMethodNotAllowed], api.ProblemTypeBase+api.ProblemMethodNotAllowed)
}

// problemConstants are the values of the Problem* constants of
// api/problem.go, read from the source so that a new one is noticed.
func problemConstants(t *testing.T) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "../../api/problem.go", nil, 0)
	require.NoError(t, err)
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Problem") || n.Name == "ProblemTypeBase" {
					continue
				}
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				require.NoError(t, err)
				out = append(out, v)
			}
		}
	}
	return out
}

// bodyAt names a body in the document: a route's request (status 0) or
// its answer with a status.
type bodyAt struct {
	route  string // "METHOD path" as the document writes it
	status int
	// item: the body is one item of the array the route answers.
	item bool
}

// wireGoldens maps each golden file of api/testdata/wire (its name
// without .json) to the bodies it is: the file's "filled" and "zero"
// values must be valid against each.
var wireGoldens = map[string][]bodyAt{
	"audit-page":            {{route: "GET /v1/audit", status: 200}},
	"channel":               {{route: "GET /v1/channels/{name}", status: 200}, {route: "PUT /v1/channels/{name}", status: 200}, {route: "GET /v1/channels", status: 200, item: true}},
	"cluster":               {{route: "GET /v1/clusters/{name}", status: 200}, {route: "PUT /v1/clusters/{name}", status: 200}, {route: "GET /v1/clusters", status: 200, item: true}},
	"cluster-spec":          {{route: "PUT /v1/clusters/{name}"}},
	"release":               {{route: "GET /v1/releases/{version}", status: 200}, {route: "PUT /v1/releases/{version}"}, {route: "GET /v1/releases", status: 200, item: true}},
	"maintenance-calendar":  {{route: "GET /v1/clusters/{name}/maintenance-policy/calendar", status: 200}},
	"maintenance-policy":    {{route: "PUT /v1/clusters/{name}/maintenance-policy"}, {route: "PUT /v1/clusters/{name}/maintenance-policy", status: 200}, {route: "GET /v1/clusters/{name}/maintenance-policy", status: 200}},
	"operations-response":   {{route: "GET /v1/agents/{cluster}/{node}/operations", status: 200}},
	"plan":                  {{route: "POST /v1/clusters/{name}/upgrade", status: 200}},
	"preflight-run":         {{route: "POST /v1/clusters/{name}/preflight", status: 202}, {route: "GET /v1/clusters/{name}/preflight/{id}", status: 200}},
	"preflight-summaries":   {{route: "GET /v1/clusters/{name}/preflight", status: 200}},
	"read-index":            {{route: "GET /v1/read-index", status: 200}},
	"relayed-beats":         {{route: "POST /v1/agents/heartbeats"}},
	"relayed-beats-answer":  {{route: "POST /v1/agents/heartbeats", status: 200}},
	"session":               {{route: "GET /v1/session", status: 200}, {route: "POST /v1/session", status: 200}},
	"upgrade":               {{route: "GET /v1/clusters/{name}/upgrade", status: 200}, {route: "POST /v1/clusters/{name}/upgrade", status: 202}, {route: "POST /v1/clusters/{name}/pools/{pool}/upgrade/{cmd}", status: 200}},
	"upgrade-status":        {{route: "GET /v1/clusters/{name}/upgrade-status", status: 200}},
	"backup-list":           {{route: "GET /v1/clusters/{name}/backups", status: 200}},
	"rollout-sequence-spec": {{route: "PUT /v1/rollout-sequences/{sequence}"}},
	"rollout-sequence": {{route: "GET /v1/rollout-sequences/{sequence}", status: 200}, {route: "PUT /v1/rollout-sequences/{sequence}", status: 200},
		{route: "GET /v1/rollout-sequences", status: 200, item: true},
		{route: "POST /v1/rollout-sequences/{sequence}/stages/{stage}/resume", status: 200}, {route: "POST /v1/rollout-sequences/{sequence}/stages/{stage}/skip", status: 200}},
	"sequence-override-request": {{route: "POST /v1/rollout-sequences/{sequence}/stages/{stage}/resume"}, {route: "POST /v1/rollout-sequences/{sequence}/stages/{stage}/skip"}},
}

// bodySchema is the schema of the body at b.
func bodySchema(t *testing.T, doc *openapi3.T, b bodyAt) *openapi3.Schema {
	method, path, _ := strings.Cut(b.route, " ")
	item := doc.Paths.Find(path)
	require.NotNil(t, item, b.route)
	op := item.GetOperation(method)
	require.NotNil(t, op, b.route)
	var c openapi3.Content
	if b.status == 0 {
		require.NotNil(t, op.RequestBody, "%s has no request body", b.route)
		c = op.RequestBody.Value.Content
	} else {
		r := op.Responses.Status(b.status)
		require.NotNil(t, r, "%s answers no %d", b.route, b.status)
		c = r.Value.Content
	}
	mt := c.Get("application/json")
	require.NotNil(t, mt, "%s %d: no application/json body", b.route, b.status)
	s := mt.Schema.Value
	if b.item {
		require.NotNil(t, s.Items, "%s %d is no array", b.route, b.status)
		s = s.Items.Value
	}
	return s
}

// TestOpenAPIWireGoldens: every wire golden file is valid against the
// schema of each body it stands for, and every one is mapped.
func TestOpenAPIWireGoldens(t *testing.T) {
	doc := loadOpenAPI(t)
	files, err := filepath.Glob("../../api/testdata/wire/*.json")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(wireGoldens)), names, "map every golden file of api/testdata/wire to its routes in wireGoldens")
	for name, at := range wireGoldens {
		raw, err := os.ReadFile(filepath.Join("../../api/testdata/wire", name+".json"))
		require.NoError(t, err)
		var golden map[string]any
		require.NoError(t, json.Unmarshal(raw, &golden))
		require.ElementsMatch(t, []string{"filled", "zero"}, slices.Collect(maps.Keys(golden)), name)
		for _, b := range at {
			s := bodySchema(t, doc, b)
			for _, which := range []string{"filled", "zero"} {
				if golden[which] == nil && s.Type.Is("array") {
					// A nil slice's zero: the handlers answer [] for
					// none, never null.
					continue
				}
				require.NoError(t, s.VisitJSON(golden[which], openapi3.EnableJSONSchema2020()), "%s.json (%s) against %s %d", name, which, b.route, b.status)
			}
		}
	}
	// A body the schema refuses fails: the check can fail.
	s := bodySchema(t, doc, bodyAt{route: "GET /v1/read-index", status: 200})
	require.Error(t, s.VisitJSON(map[string]any{"index": "seven"}, openapi3.EnableJSONSchema2020()))
	require.Error(t, s.VisitJSON(map[string]any{}, openapi3.EnableJSONSchema2020()))
}
