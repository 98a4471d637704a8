package files_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/tools/files"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mount returns a root with the core services (tools, approval, the
// protected-path list) and tools.files applied with cfg (nil for the
// defaults).
func mount(t *testing.T, cfg any) (*dshctx.Context, *tools.Service) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	f, err := root.Plugin(files.Plugin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatalf("mounting tools.files: %v", err)
	}
	svc, err := tools.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, svc
}

func TestThePluginRegistersToolsThatRunThroughTheService(t *testing.T) {
	root, svc := mount(t, nil)
	var names []string
	for _, s := range svc.Specs(root) {
		names = append(names, s.Name)
		var schema struct {
			Type     string         `json:"type"`
			Props    map[string]any `json:"properties"`
			Extra    *bool          `json:"additionalProperties"`
			Required []string       `json:"required"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema.Type != "object" || schema.Extra == nil || *schema.Extra {
			t.Errorf("%s: the schema must be an object refusing extra properties: %s (%v)", s.Name, s.Parameters, err)
		}
		for _, r := range schema.Required {
			if _, ok := schema.Props[r]; !ok {
				t.Errorf("%s requires %q, which it does not describe", s.Name, r)
			}
		}
		if s.Description == "" {
			t.Errorf("%s has no description", s.Name)
		}
	}
	if strings.Join(names, " ") != "edit glob grep list read write" {
		t.Fatalf("registered %v", names)
	}
	for name, parallel := range map[string]bool{"read": true, "list": true, "glob": true, "grep": true, "write": false, "edit": false} {
		if tl := svc.Lookup(root, name); tl.ParallelSafe != parallel || tl.Approval != "" {
			t.Errorf("%s: ParallelSafe %v Approval %q", name, tl.ParallelSafe, tl.Approval)
		}
	}

	ws := t.TempDir()
	call := func(name, args string) tools.Result {
		r, err := svc.Execute(stdctx.Background(), root, tools.Call{ID: "c", Name: name, Arguments: json.RawMessage(args), Workspace: ws})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	if r := call("write", `{"path":"notes/a.txt","content":"hello\n"}`); r.IsError || r.Content != "created notes/a.txt (6 bytes)" {
		t.Fatalf("write: %+v", r)
	}
	if r := call("read", `{"path":"notes/a.txt"}`); r.IsError || r.Content != "     1\thello\n" {
		t.Fatalf("read: %+v", r)
	}
	if r := call("read", `{"path":"../x"}`); !r.IsError || !strings.Contains(r.Content, "workspace/dotdot") {
		t.Fatalf("escape through the service: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "notes/a.txt")); string(b) != "hello\n" {
		t.Fatalf("on disk: %q", b)
	}
}

func TestConfigSelectsTools(t *testing.T) {
	root, svc := mount(t, files.Config{Tools: []string{"read", "grep"}})
	if specs := svc.Specs(root); len(specs) != 2 || specs[0].Name != "grep" || specs[1].Name != "read" {
		t.Fatalf("specs %v", specs)
	}
	// The limits reach the descriptions.
	root, svc = mount(t, files.Config{ReadMaxLines: 7})
	if d := svc.Lookup(root, "read"); d == nil || !strings.Contains(d.Description, "at most 7 lines") {
		t.Fatalf("read's description does not state its limit")
	}
}

func TestConfigValidation(t *testing.T) {
	if err := (files.Config{Tools: []string{"read", "bash"}}).Validate(); err == nil || !strings.Contains(err.Error(), `"bash"`) {
		t.Fatalf("unknown tool: %v", err)
	}
	if err := (files.Config{GrepMaxMatches: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "grep_max_matches") {
		t.Fatalf("negative limit: %v", err)
	}
	if err := (files.Config{}).Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	// The config is refused when handed over, before a fiber exists.
	if _, err := root.Plugin(files.Plugin, files.Config{Tools: []string{"nope"}}); !errs.Has(err, errs.InvalidArgument, dshctx.ReasonInvalidConfig) {
		t.Fatal("an invalid config must fail the mount")
	}
}
