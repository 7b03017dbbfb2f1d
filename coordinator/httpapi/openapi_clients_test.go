package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// clientRequest is a request a client of the API makes, as its source
// writes it: the method and the path with every part the source computes
// written {} and the query left out.
type clientRequest struct {
	method, path string
	at           string // file:line
}

// clientDirs hold the Go clients of the API: the typed client
// (api/client), moltctl, the agent, and a member joining the coordinator.
var clientDirs = []string{"../../api/client", "../../cmd/moltctl", "../../agent", "../../cmd/molt-coordinator"}

// TestOpenAPIClientRequests: every request moltctl, the agent, a joining
// member and the web view make is to an operation of docs/openapi.yaml.
// The Go clients are read for their calls of client.Client's Do (and the
// client's own idempotentDo) with an http.Method constant; the web view
// for its calls of api() and optional() in app.js.
func TestOpenAPIClientRequests(t *testing.T) {
	doc := loadOpenAPI(t)
	var ops []string
	for name := range specOps(doc) {
		ops = append(ops, name)
	}
	var reqs []clientRequest
	for _, dir := range clientDirs {
		reqs = append(reqs, goClientRequests(t, dir)...)
	}
	goCalls := len(reqs)
	js := jsClientRequests(t, "../../web/static/app.js")
	reqs = append(reqs, js...)
	// The readers find what they look for: were a call's shape to
	// change, they would find nothing and check nothing.
	require.GreaterOrEqual(t, goCalls, 30, "the Go clients' requests")
	require.GreaterOrEqual(t, len(js), 20, "the web view's requests")
	for _, r := range reqs {
		require.True(t, documented(ops, r), "%s: %s %s is not in docs/openapi.yaml", r.at, r.method, r.path)
	}
	t.Logf("%d requests in Go clients, %d in the web view, all documented", goCalls, len(js))

	// A request to an undocumented path fails.
	require.False(t, documented(ops, clientRequest{method: "POST", path: "/v1/clusters/{}/pause"}))
	require.False(t, documented(ops, clientRequest{method: "DELETE", path: "/v1/members"}))
}

// documented reports whether r is a request to one of ops ("METHOD
// path"): a literal segment of r matches itself or a parameter, a
// computed one ({}) only a parameter.
func documented(ops []string, r clientRequest) bool {
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		if method != r.method {
			continue
		}
		want, got := strings.Split(path, "/"), strings.Split(r.path, "/")
		if len(want) != len(got) {
			continue
		}
		ok := true
		for i := range want {
			param := strings.HasPrefix(want[i], "{") && strings.HasSuffix(want[i], "}")
			if !param && want[i] != got[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// goClientRequests reads dir's non-test Go files for calls
// X.Do(ctx, http.MethodM, path, ...) and X.idempotentDo(...).
func goClientRequests(t *testing.T, dir string) []clientRequest {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []clientRequest
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			// The paths a function builds in a variable first.
			vars := map[string]ast.Expr{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.DEFINE && len(as.Lhs) == len(as.Rhs) {
					for i, l := range as.Lhs {
						if id, ok := l.(*ast.Ident); ok {
							vars[id.Name] = as.Rhs[i]
						}
					}
				}
				return true
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) < 3 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Do" && sel.Sel.Name != "idempotentDo") {
					return true
				}
				m, ok := call.Args[1].(*ast.SelectorExpr)
				if x, isIdent := m.X.(*ast.Ident); !ok || !isIdent || x.Name != "http" || !strings.HasPrefix(m.Sel.Name, "Method") {
					return true
				}
				p := pathTemplate(call.Args[2], vars)
				if i := strings.IndexByte(p, '?'); i >= 0 {
					p = p[:i]
				}
				pos := fset.Position(call.Pos())
				out = append(out, clientRequest{
					method: strings.ToUpper(strings.TrimPrefix(m.Sel.Name, "Method")), path: p,
					at: filepath.Base(filepath.Dir(pos.Filename)) + "/" + filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line),
				})
				return true
			})
		}
	}
	return out
}

// pathTemplate writes the path e builds: string literals as they are,
// what is computed as {}.
func pathTemplate(e ast.Expr, vars map[string]ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(e.Value); err == nil {
			return s
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return pathTemplate(e.X, vars) + pathTemplate(e.Y, vars)
		}
	case *ast.Ident:
		if v, ok := vars[e.Name]; ok {
			delete(vars, e.Name) // no loops
			defer func() { vars[e.Name] = v }()
			return pathTemplate(v, vars)
		}
	case *ast.CallExpr:
		// api/client's agentPath(cluster, node, rest).
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "agentPath" && len(e.Args) == 3 {
			return "/v1/agents/{}/{}" + pathTemplate(e.Args[2], vars)
		}
		// moltctl's apiPath(seg, ...): "/v1" and each segment, escaped.
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "apiPath" {
			p := "/v1"
			for _, a := range e.Args {
				seg := pathTemplate(a, vars)
				if strings.Contains(seg, "/") {
					seg = "{}" // escaped into one segment
				}
				p += "/" + seg
			}
			return p
		}
	case *ast.ParenExpr:
		return pathTemplate(e.X, vars)
	}
	return "{}"
}

var (
	jsCall = regexp.MustCompile(`\b(api\('([A-Z]+)'|optional\('[a-z]+')\s*,\s*`)
	// cpath(c) is `/v1/clusters/${enc(c)}`.
	jsClusterPath = regexp.MustCompile(`\$\{cpath\([^)]*\)\}|^cpath\([^)]*\)`)
	jsInterp      = regexp.MustCompile(`\$\{[^}]*\}`)
)

// jsClientRequests reads app.js for its calls of api(method, path, ...)
// and optional(name, path) (a GET), its only ways to the API.
func jsClientRequests(t *testing.T, file string) []clientRequest {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	src := string(b)
	require.Equal(t, 1, strings.Count(src, "fetch("), "app.js fetches only in api()")
	var out []clientRequest
	for _, m := range jsCall.FindAllStringSubmatchIndex(src, -1) {
		method := "GET"
		if m[4] >= 0 {
			method = src[m[4]:m[5]]
		}
		expr := jsArg(src[m[1]:])
		if expr == "path" {
			continue // optional() passing its own argument on to api()
		}
		p := jsClusterPath.ReplaceAllString(expr, "/v1/clusters/{}")
		switch {
		case strings.HasPrefix(p, "'") && strings.HasSuffix(p, "'"), strings.HasPrefix(p, "`") && strings.HasSuffix(p, "`"):
			p = p[1 : len(p)-1]
		case strings.HasPrefix(p, "/v1/"):
		default:
			p = "{" + p + "}" // a path computed elsewhere: no match
		}
		p = jsInterp.ReplaceAllString(p, "{}")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		// `/v1/audit${q}`: what follows the last segment is its query.
		if s, ok := strings.CutSuffix(p, "{}"); ok && !strings.HasSuffix(s, "/") {
			p = s
		}
		line := strings.Count(src[:m[0]], "\n") + 1
		out = append(out, clientRequest{method: method, path: p, at: "web/static/app.js:" + strconv.Itoa(line)})
	}
	return out
}

// jsArg is the JavaScript argument s starts with, up to the comma or
// parenthesis that ends it.
func jsArg(s string) string {
	depth, quote := 0, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '`' || c == '"':
			quote = c
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			if depth == 0 {
				return strings.TrimSpace(s[:i])
			}
			depth--
		case c == ',' && depth == 0:
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}
