package lsp_test

import (
	stdctx "context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/lsp"
	"github.com/dsh-go/dsh/plugins/tools/files"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gopls finds the gopls the tests use: on PATH, or where go install puts
// it. CI installs it (.ci/run); a machine without it fails these tests
// with the command to run.
func gopls(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("gopls"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "gopls")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("gopls is not installed: run go install golang.org/x/tools/gopls@v0.23.0")
	return ""
}

// goServer is gopls at its absolute path, so the tests need no PATH.
func goServer(t testing.TB) lsp.Server {
	s := lsp.Gopls()
	s.Command = gopls(t)
	return s
}

// module is a small Go module in a fresh folder: a function and its
// callers.
func module(t testing.TB) string {
	t.Helper()
	ws := t.TempDir()
	write(t, ws, "go.mod", "module example.com/m\n\ngo 1.22\n")
	write(t, ws, "calc.go", "package main\n\n// Add adds two numbers.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n")
	write(t, ws, "main.go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(Add(1, 2))\n\tfmt.Println(Add(3, 4))\n}\n")
	return ws
}

func write(t testing.TB, ws, rel, text string) {
	t.Helper()
	p := filepath.Join(ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mount is a root with the core services, tools.files and lsp (cfg).
func mount(t testing.TB, cfg lsp.Config) (*dshctx.Context, *tools.Service) {
	t.Helper()
	return mountLog(t, cfg, hclog.NewNullLogger())
}

func mountLog(t testing.TB, cfg lsp.Config, log hclog.Logger) (*dshctx.Context, *tools.Service) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(log))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		f    func() (interface{ Await(stdctx.Context) error }, error)
	}{
		{"tools.files", func() (interface{ Await(stdctx.Context) error }, error) { return root.Plugin(files.Plugin, nil) }},
		{"lsp", func() (interface{ Await(stdctx.Context) error }, error) { return root.Plugin(lsp.Plugin, cfg) }},
	} {
		f, err := p.f()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatalf("mounting %s: %v", p.name, err)
		}
	}
	svc, err := tools.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, svc
}

// call runs a tool through the service, as the agent loop does.
func call(t testing.TB, root *dshctx.Context, svc *tools.Service, ws, name string, args any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.Execute(stdctx.Background(), root, tools.Call{ID: "c", Name: name, Arguments: raw, Workspace: ws})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

type m = map[string]any

// syncWriter lets a logger write from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
