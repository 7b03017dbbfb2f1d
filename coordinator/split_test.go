package coordinator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// leaderFiles are the leader runtime's files (doc.go, DESIGN.md "Request
// service and leader runtime"): their methods are leader's, made per term,
// and none is the request service's.
var leaderFiles = map[string]bool{
	"leader.go": true, "tick.go": true, "work.go": true, "migwork.go": true,
	"gates.go": true, "preflightwork.go": true, "scheduler.go": true, "cloudwait.go": true,
}

// TestLeaderRuntimeApart holds the split between the request service and
// the leader runtime: a leader file declares methods of leader only
// (startTerm and endTerm, which make and end a term, excepted), leader
// has no exported method (the HTTP layer never reaches it), and no method
// of leader lives outside the leader files.
func TestLeaderRuntimeApart(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			recv := fn.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			id, ok := recv.(*ast.Ident)
			if !ok {
				continue
			}
			where := path + ": " + id.Name + "." + fn.Name.Name
			switch {
			case id.Name == "leader":
				require.True(t, leaderFiles[path], "%s: a method of leader outside the leader files", where)
				require.False(t, fn.Name.IsExported(), "%s: the leader runtime exports nothing", where)
			case id.Name == "Coordinator" && leaderFiles[path]:
				require.Contains(t, []string{"startTerm", "endTerm"}, fn.Name.Name, "%s: a Coordinator method in a leader file", where)
			}
		}
	}
}
