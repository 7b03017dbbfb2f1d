package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxInterfaceMethods bounds each interface the API declares of the
// coordinator: a handler group that needs more is two groups, so that a
// new endpoint touches its own interface and a test's fake stands in for
// what it serves only.
const maxInterfaceMethods = 8

// TestServiceInterfacesStaySmall holds every interface of the package to
// maxInterfaceMethods, and every field of Services to an interface
// declared here (beside the handlers that use it) rather than a concrete
// coordinator type.
func TestServiceInterfacesStaySmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	declared := map[string]string{} // interface → file
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				return true
			}
			declared[ts.Name.Name] = path
			n2 := 0
			for _, m := range it.Methods.List {
				n2 += max(len(m.Names), 1)
			}
			require.LessOrEqual(t, n2, maxInterfaceMethods, "interface %s (%s) has %d methods", ts.Name.Name, path, n2)
			return true
		})
	}
	st := reflect.TypeFor[Services]()
	for i := range st.NumField() {
		f := st.Field(i)
		require.Equal(t, reflect.Interface, f.Type.Kind(), "Services.%s", f.Name)
		require.Contains(t, declared, f.Type.Name(), "Services.%s: %s is not declared in package httpapi", f.Name, f.Type)
	}
}
