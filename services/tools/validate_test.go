package tools_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

const editSchema = `{
	"type": "object",
	"properties": {
		"path": {"type": "string"},
		"mode": {"enum": ["fast", "slow"]},
		"tag": {"type": "string", "pattern": "^[a-z]+$"},
		"limit": {"type": "integer", "minimum": 1},
		"edits": {"type": "array", "items": {
			"type": "object",
			"properties": {"old": {"type": "string"}, "new": {"type": "string"}},
			"required": ["old", "new"]
		}}
	},
	"required": ["path"],
	"additionalProperties": false
}`

// recorder is a tool that keeps the arguments it ran with.
type recorder struct{ ran []string }

func (r *recorder) tool(name, schema string) tools.Tool {
	return tools.Tool{Name: name, Parameters: []byte(schema), Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		r.ran = append(r.ran, string(c.Arguments))
		return tools.Result{Content: "ok"}, nil
	}}
}

func newRoot(t testing.TB) *dshctx.Context {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	t.Cleanup(func() { root.Dispose(stdctx.Background()) })
	return root
}

func TestArgumentsAreValidatedBeforeTheToolRuns(t *testing.T) {
	root := newRoot(t)
	s := tools.New()
	var rec recorder
	if err := s.Register(root, rec.tool("edit", editSchema)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, args string
		want       []string
	}{
		{"missing required", `{}`, []string{`"path" is required but missing`}},
		{"empty means {}", ``, []string{`"path" is required but missing`}},
		{"wrong type", `{"path": 7}`, []string{`argument "path" must be string, not number`}},
		{"nested path", `{"path": "a", "edits": [{"old": "x", "new": "y"}, {"old": 1}]}`,
			[]string{`"edits[1].new" is required but missing`, `argument "edits[1].old" must be string, not number`}},
		{"unknown argument", `{"path": "a", "pth": "b"}`, []string{`"pth" is not a parameter of this tool`}},
		{"bound", `{"path": "a", "limit": 0}`, []string{`argument "limit" must be at least 1, not 0`}},
		{"fraction", `{"path": "a", "limit": 1.5}`, []string{`argument "limit" must be integer, not number`}},
		{"enum", `{"path": "a", "mode": "quick"}`, []string{`argument "mode" must be one of ["fast","slow"]`}},
		{"keyword the library words", `{"path": "a", "tag": "A1"}`, []string{`pattern`, `"A1"`}},
		{"not an object", `["a"]`, []string{`the arguments must be object, not array`}},
		{"not JSON", `{"path": "a"`, []string{`not valid JSON`, `one JSON object`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "edit", Arguments: []byte(c.args)})
			if err != nil || !r.IsError {
				t.Fatalf("want an error result, got %+v %v", r, err)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Content, w) {
					t.Errorf("result does not say %q:\n%s", w, r.Content)
				}
			}
			if !strings.Contains(r.Content, `"edit"`) || !strings.Contains(r.Content, "did not run") {
				t.Errorf("the result must name the tool and say it did not run:\n%s", r.Content)
			}
		})
	}
	if len(rec.ran) != 0 {
		t.Fatalf("the tool ran with invalid arguments: %q", rec.ran)
	}
	r, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "edit", Arguments: []byte(`{"path": "a", "edits": [{"old": "x", "new": "y"}]}`)})
	if err != nil || r.IsError || len(rec.ran) != 1 {
		t.Fatalf("valid arguments must run: %+v %v %q", r, err, rec.ran)
	}
}

func TestManyProblemsAreCapped(t *testing.T) {
	root := newRoot(t)
	s := tools.New()
	var rec recorder
	s.Register(root, rec.tool("t", `{"type": "object", "additionalProperties": {"type": "string"}}`))
	r, _ := s.Execute(stdctx.Background(), root, tools.Call{Name: "t", Arguments: []byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}`)})
	if strings.Count(r.Content, "\n- ") != 6 || !strings.Contains(r.Content, "and 2 more") {
		t.Fatalf("want five problems and a count of the rest:\n%s", r.Content)
	}
}

func TestToolWithoutSchemaGetsJSONAndEmptyObject(t *testing.T) {
	root := newRoot(t)
	s := tools.New()
	var rec recorder
	s.Register(root, rec.tool("free", ""))
	if r, _ := s.Execute(stdctx.Background(), root, tools.Call{Name: "free", Arguments: []byte(`{"x":`)}); !r.IsError {
		t.Fatalf("arguments that are not JSON must be refused even without a schema: %+v", r)
	}
	s.Execute(stdctx.Background(), root, tools.Call{Name: "free"})
	if len(rec.ran) != 1 || rec.ran[0] != "{}" {
		t.Fatalf("a call without arguments must reach the tool as {}: %q", rec.ran)
	}
}

func TestInvalidSchemaFailsRegistration(t *testing.T) {
	root := newRoot(t)
	s := tools.New()
	var rec recorder
	for name, schema := range map[string]string{
		"not-json":    `{`,
		"bad-type":    `{"type": 12}`,
		"bad-keyword": `{"type": "object", "properties": {"a": {"minimum": "one"}}}`,
		"remote-ref":  `{"$ref": "file:///etc/passwd"}`,
	} {
		err := s.Register(root, rec.tool(name, schema))
		if !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("%s: want INVALID_ARGUMENT naming the tool, got %v", name, err)
		}
		if s.Lookup(root, name) != nil {
			t.Errorf("%s: a tool with an invalid schema must not be registered", name)
		}
	}
}

// TestScopedToolsAreValidatedToo: a tool a plugin registers in an agent's
// scope passes the same validation as a global one.
func TestScopedToolsAreValidatedToo(t *testing.T) {
	root := newRoot(t)
	s := tools.New()
	a, _ := root.Scoped("a")
	var rec recorder
	if err := s.Register(a, rec.tool("edit", editSchema)); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(a, rec.tool("broken", `{"type": "nope"}`)); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("a scoped tool's schema must be checked: %v", err)
	}
	if r, _ := s.Execute(stdctx.Background(), a, tools.Call{Name: "edit", Arguments: []byte(`{}`)}); !r.IsError {
		t.Fatalf("scoped tool ran unvalidated: %+v", r)
	}
}

// TestASchemaTextIsResolvedOnce: agents that mount the same tools share
// the resolved schema, so a second registration of the same text does not
// parse and resolve it again, and both tools still validate.
func TestASchemaTextIsResolvedOnce(t *testing.T) {
	root := newRoot(t)
	s := tools.New()
	var rec recorder
	if err := s.Register(root, rec.tool("first", editSchema)); err != nil {
		t.Fatal(err)
	}
	var scopes []*dshctx.Context
	allocs := testing.AllocsPerRun(20, func() {
		a, _ := root.Scoped(fmt.Sprintf("agent-%d", len(scopes)))
		scopes = append(scopes, a)
		if err := s.Register(a, rec.tool("again", editSchema)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 60 {
		t.Fatalf("registering a schema already resolved took %.0f allocations; it was resolved again", allocs)
	}
	a := scopes[len(scopes)-1]
	for _, name := range []string{"first", "again"} {
		at := root
		if name == "again" {
			at = a
		}
		r, _ := s.Execute(stdctx.Background(), at, tools.Call{Name: name, Arguments: []byte(`{"limit": 0}`)})
		if !r.IsError || !strings.Contains(r.Content, `"path" is required`) || !strings.Contains(r.Content, `"`+name+`"`) {
			t.Fatalf("%s: %+v", name, r)
		}
	}
}
