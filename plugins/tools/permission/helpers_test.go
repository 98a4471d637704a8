package permission_test

import (
	stdctx "context"
	"encoding/json"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// workspace is the workspace of every call in these tests.
const workspace = "/home/ana/project"

// tool returns a tool named name as the built-in tools declare it: bash
// asks by default, the others allow.
func tool(name string) *tools.Tool {
	t := &tools.Tool{Name: name}
	if name == "bash" {
		t.Approval = tools.Ask
	}
	return t
}

func newRoot(t testing.TB) *dshctx.Context {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	return root
}

// mount applies tools.permission with cfg at ctx and returns its fiber.
func mount(t testing.TB, at *dshctx.Context, cfg permission.Config) *dshctx.Fiber {
	t.Helper()
	f, err := at.Plugin(permission.Plugin, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

// policyOf mounts cfg on a fresh root and returns the root.
func policyOf(t testing.TB, cfg permission.Config) *dshctx.Context {
	t.Helper()
	root := newRoot(t)
	mount(t, root, cfg)
	return root
}

func approve(t testing.TB, at *dshctx.Context, name string, args any) tools.Verdict {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tools.EventApprove.Dispatch(stdctx.Background(), at, tools.Approval{
		Call: tools.Call{Name: name, Arguments: raw, Workspace: workspace},
		Tool: tool(name),
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func bash(at *dshctx.Context, t testing.TB, command string) tools.Verdict {
	t.Helper()
	return approve(t, at, "bash", map[string]string{"command": command})
}

func onPath(p string) map[string]string { return map[string]string{"path": p} }
