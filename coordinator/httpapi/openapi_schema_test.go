package httpapi

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/moltproject/molt/api"
)

// The schemas of docs/openapi.yaml (components.schemas) are written from
// the wire types of package api by schemaYAML, so that they say what the
// Go encoder writes: a field without omitempty or omitzero is required, a
// nil slice, map or pointer without them is null, a time is an RFC 3339
// string, a duration whole nanoseconds. The rest of the document (paths,
// roles, problems, examples) is written by hand. TestOpenAPI fails when
// the file's schemas differ from what package api now encodes; -update
// rewrites them.

// schemaMarker starts the generated part of docs/openapi.yaml, which runs
// to the end of the file.
const schemaMarker = "  # Generated from the wire types of package api"

// wireBodies are the request and answer bodies of the routes: the roots
// of the generated schemas. Every type they reach gets a schema of its
// own, named as the Go type is.
var wireBodies = []any{
	api.Member{}, api.JoinRequest{}, api.JoinResponse{},
	api.Token{}, api.TokenRequest{}, api.RewrapResult{}, api.AuditPage{},
	api.Channel{}, api.ChannelUpdate{}, api.Release{},
	api.RolloutSequence{}, api.RolloutSequenceSpec{}, api.SequenceOverrideRequest{}, api.SequencePlan{},
	api.Cluster{}, api.ClusterSpec{}, api.Upgrade{}, api.UpgradeRequest{}, api.Plan{},
	api.PreflightRequest{}, api.PreflightRun{}, api.PreflightRunSummary{},
	api.MaintenancePolicy{}, api.MaintenanceCheck{}, api.MaintenanceCalendar{}, api.UpgradeStatus{}, api.Backup{}, api.BackupList{},
	api.EnrollRequest{}, api.EnrollResponse{}, api.RenewRequest{},
	api.RegisterRequest{}, api.RegisterResponse{}, api.AgentHealth{},
	api.OperationsResponse{}, api.OperationResult{},
	api.RelayedBeats{}, api.RelayedBeatsAnswer{}, api.ReadIndex{}, api.MemberSelf{},
	api.Session{}, api.Problem{},
}

// schemaGen turns Go types into JSON Schema (2020-12, as OpenAPI 3.1
// takes it).
type schemaGen struct {
	defs  map[string]any
	types map[string]reflect.Type
	docs  map[string]string // "Type" and "Type.Field" -> doc comment
	err   error
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
)

// schemaYAML is the generated part of docs/openapi.yaml for roots, with
// the descriptions taken from the doc comments of the Go files in srcDir.
func schemaYAML(srcDir string, roots []any) ([]byte, error) {
	docs, err := goDocs(srcDir)
	if err != nil {
		return nil, err
	}
	g := &schemaGen{defs: map[string]any{}, types: map[string]reflect.Type{}, docs: docs}
	for _, r := range roots {
		g.schema(reflect.TypeOf(r))
	}
	if g.err != nil {
		return nil, g.err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(map[string]any{"schemas": g.defs}); err != nil {
		return nil, err
	}
	out := bytes.Buffer{}
	out.WriteString(schemaMarker + " by TestOpenAPI (go test ./coordinator/httpapi -run TestOpenAPI -update);\n")
	out.WriteString("  # edit the Go types and their comments, not what follows.\n")
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line != "" {
			out.WriteString("  " + line)
		}
	}
	return out.Bytes(), nil
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// schema is t's schema: a reference for a named struct, inline otherwise.
func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case durationType:
		return map[string]any{"type": "integer", "description": "nanoseconds"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Interface:
		return map[string]any{} // any JSON value
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			g.fail("%s: map keys other than strings are not described", t)
		}
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if name == "" {
			g.fail("%s: anonymous structs are not described; name the type", t)
			return nil
		}
		if prev, ok := g.types[name]; ok {
			if prev != t {
				g.fail("%s and %s share the schema name %s", prev, t, name)
			}
			return ref(name)
		}
		g.types[name] = t
		g.defs[name] = nil // reserve the name before recursing
		g.defs[name] = g.object(t)
		return ref(name)
	}
	g.fail("%s: kind %s is not described", t, t.Kind())
	return nil
}

// object describes a struct as encoding/json writes it.
func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			g.fail("%s.%s: embedded fields are not described", t, f.Name)
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		omit := false
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "omitempty", "omitzero":
				omit = true
			case "string":
				g.fail("%s.%s: the ,string option is not described", t, f.Name)
			}
		}
		s := g.schema(f.Type)
		if !omit {
			required = append(required, name)
			switch f.Type.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map:
				s = nullable(s) // nil encodes as null
			}
		}
		if d := g.docs[t.Name()+"."+f.Name]; d != "" {
			if _, isRef := s["$ref"]; isRef {
				// A reference's siblings are honoured in 3.1; keep
				// the description beside it.
				s = map[string]any{"$ref": s["$ref"], "description": d}
			} else {
				s["description"] = d
			}
		}
		props[name] = s
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	if d := g.docs[t.Name()]; d != "" {
		out["description"] = d
	}
	return out
}

// nullable lets s be null as well.
func nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		c := map[string]any{}
		for k, v := range s {
			c[k] = v
		}
		c["type"] = []any{typ, "null"}
		return c
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

func (g *schemaGen) fail(format string, args ...any) {
	if g.err == nil {
		g.err = fmt.Errorf(format, args...)
	}
}

// goDocs reads the doc comments of the types and struct fields declared
// in dir's non-test Go files: a type's from its declaration, a field's
// from the comment above it or, failing that, beside it.
func goDocs(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				docs[ts.Name.Name] = docText(doc)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fl := range st.Fields.List {
					d := fl.Doc
					if d == nil {
						d = fl.Comment
					}
					for _, n := range fl.Names {
						docs[ts.Name.Name+"."+n.Name] = docText(d)
					}
				}
			}
		}
	}
	return docs, nil
}

var spaces = regexp.MustCompile(`\s+`)

// docText is a comment as one paragraph of text.
func docText(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	return strings.TrimSpace(spaces.ReplaceAllString(c.Text(), " "))
}
