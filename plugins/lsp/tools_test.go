package lsp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/lsp"
	"github.com/hashicorp/go-hclog"
)

// TestDefinitionReferencesHoverAndSymbolsThroughGopls: each tool answers
// from gopls on a small module.
func TestDefinitionReferencesHoverAndSymbolsThroughGopls(t *testing.T) {
	ws := module(t)
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{goServer(t)}})

	r := call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 6, "symbol": "Add"})
	if r.IsError || !strings.Contains(r.Content, "1 location\ncalc.go:4:6: func Add(a, b int) int {") {
		t.Fatalf("definition of Add:\n%s", r.Content)
	}
	// The same place by column (main.go:6 is "\tfmt.Println(Add(1, 2))").
	r = call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 6, "column": 14})
	if r.IsError || !strings.Contains(r.Content, "calc.go:4:6:") {
		t.Fatalf("definition of Add by column:\n%s", r.Content)
	}

	r = call(t, root, svc, ws, "lsp_references", m{"path": "calc.go", "line": 4, "symbol": "Add"})
	for _, want := range []string{"3 locations", "calc.go:4:6:", "main.go:6:14: fmt.Println(Add(1, 2))", "main.go:7:14: fmt.Println(Add(3, 4))"} {
		if r.IsError || !strings.Contains(r.Content, want) {
			t.Fatalf("references of Add lack %q:\n%s", want, r.Content)
		}
	}

	r = call(t, root, svc, ws, "lsp_hover", m{"path": "main.go", "line": 6, "symbol": "Add"})
	if r.IsError || !strings.Contains(r.Content, "func Add(a int, b int) int") || !strings.Contains(r.Content, "Add adds two numbers.") {
		t.Fatalf("hover on Add:\n%s", r.Content)
	}

	r = call(t, root, svc, ws, "lsp_symbols", m{"query": "Add"})
	if r.IsError || !strings.Contains(r.Content, "Add (function) calc.go:4:6") {
		t.Fatalf("workspace symbols for Add:\n%s", r.Content)
	}

	// Bad places are errors the model can act on.
	r = call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 6, "symbol": "Nope"})
	if !r.IsError || !strings.Contains(r.Content, `"Nope" is not on line 6 of main.go`) {
		t.Fatalf("a symbol not on the line: %s", r.Content)
	}
	r = call(t, root, svc, ws, "lsp_hover", m{"path": "README.md", "line": 1, "column": 1})
	if !r.IsError || !strings.Contains(r.Content, "LSP_NO_SERVER") {
		t.Fatalf("a file no server handles: %s", r.Content)
	}
	r = call(t, root, svc, ws, "lsp_hover", m{"path": "main.go", "line": 1})
	if !r.IsError || !strings.Contains(r.Content, "give column") {
		t.Fatalf("a place without column or symbol: %s", r.Content)
	}
}

// goplsChildren lists the gopls processes this test process started.
func goplsChildren(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || !bytes.Contains(stat[:i], []byte("(gopls")) {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) && fields[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// TestACrashedServerIsRestarted: gopls killed outright is started again
// on next use, and answers.
func TestACrashedServerIsRestarted(t *testing.T) {
	ws := module(t)
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{goServer(t)}, RestartBackoff: 200 * time.Millisecond})
	if r := call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 6, "symbol": "Add"}); r.IsError {
		t.Fatal(r.Content)
	}
	pids := goplsChildren(t)
	if len(pids) != 1 {
		t.Fatalf("want one gopls running, have %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for slices := goplsChildren(t); len(slices) > 0 && time.Now().Before(deadline); slices = goplsChildren(t) {
		time.Sleep(20 * time.Millisecond)
	}
	r := call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 7, "symbol": "Add"})
	if r.IsError || !strings.Contains(r.Content, "calc.go:4:6:") {
		t.Fatalf("after the crash, definition must work on a restarted gopls:\n%s", r.Content)
	}
	now := goplsChildren(t)
	if len(now) != 1 || now[0] == pids[0] {
		t.Fatalf("want one new gopls, have %v (the killed one was %d)", now, pids[0])
	}
	// Diagnostics work on the new server too.
	r = call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(1, 2)", "new": "Sub(1, 2)"})
	if !strings.Contains(r.Content, "undefined: Sub") {
		t.Fatalf("after the restart, the edit must carry gopls's diagnostic:\n%s", r.Content)
	}
}

// TestAMissingServerIsReportedOnce: a command that is not installed is
// told in the first edit's result with its code, logged once, and not
// looked for again; edits go on without diagnostics, and the tools say
// why they cannot answer.
func TestAMissingServerIsReportedOnce(t *testing.T) {
	ws := module(t)
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &syncWriter{w: &logs}, Level: hclog.Warn})
	missing := lsp.Server{Name: "nols", Command: "dsh-test-no-such-language-server", Files: []string{"*.go"}}
	root, svc := mountLog(t, lsp.Config{Servers: []lsp.Server{missing}}, log)

	r := call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(1, 2)", "new": "Sub(1, 2)"})
	if r.IsError || !strings.Contains(r.Content, "LSP_SERVER_MISSING") || !strings.Contains(r.Content, "dsh-test-no-such-language-server") {
		t.Fatalf("the first edit must succeed and say the server is missing, with the code:\n%s", r.Content)
	}
	for i := 0; i < 3; i++ {
		r = call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(3, 4)", "new": "Add(3, 5)"})
		if r.IsError || strings.Contains(r.Content, "LSP_SERVER_MISSING") {
			t.Fatalf("edit %d: the missing server must be told once, not per call:\n%s", i+2, r.Content)
		}
		r = call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(3, 5)", "new": "Add(3, 4)"})
		if r.IsError {
			t.Fatal(r.Content)
		}
	}
	r = call(t, root, svc, ws, "lsp_hover", m{"path": "main.go", "line": 6, "column": 14})
	if !r.IsError || !strings.Contains(r.Content, "LSP_SERVER_MISSING") {
		t.Fatalf("a tool call must say why it cannot answer: %s", r.Content)
	}
	if n := strings.Count(logs.String(), "language server not installed"); n != 1 {
		t.Fatalf("the missing server was logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestAServerThatKeepsFailingDoesNotHoldEdits: a server that exits at
// once fails its start with its stderr in the note; while it waits out
// its back-off, edits go on at once, saying it is restarting, and the
// lsp tools say when to try again.
func TestAServerThatKeepsFailingDoesNotHoldEdits(t *testing.T) {
	ws := module(t)
	crashing := lsp.Server{Name: "crashy", Command: "sh", Args: []string{"-c", "echo no config here >&2; exit 3"}, Files: []string{"*.go"}}
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{crashing}, RestartBackoff: 10 * time.Second, RequestTimeout: time.Second})

	r := call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(1, 2)", "new": "Add(1, 5)"})
	if r.IsError || !strings.Contains(r.Content, "LSP_SERVER_FAILED") || !strings.Contains(r.Content, "no config here") {
		t.Fatalf("the first edit must succeed and say why the server did not start:\n%s", r.Content)
	}
	began := time.Now()
	r = call(t, root, svc, ws, "edit", m{"path": "main.go", "old": "Add(1, 5)", "new": "Add(1, 2)"})
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("an edit waited %s for a server in back-off", took)
	}
	if r.IsError || !strings.Contains(r.Content, "LSP_SERVER_RESTARTING") {
		t.Fatalf("the second edit must say the server is restarting:\n%s", r.Content)
	}
	r = call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 6, "symbol": "Add"})
	if !r.IsError || !strings.Contains(r.Content, "LSP_SERVER_RESTARTING") || !strings.Contains(r.Content, "try again") {
		t.Fatalf("a tool must say when to try again: %s", r.Content)
	}
}

// TestTheToolsReadNothingOutsideTheWorkspace: a symlink in the workspace
// leading out of it is refused before any server sees it, and a
// definition outside the workspace (the standard library) is a path and
// a position, without the file's text.
func TestTheToolsReadNothingOutsideTheWorkspace(t *testing.T) {
	ws := module(t)
	outside := filepath.Join(t.TempDir(), "secret.go")
	if err := os.WriteFile(outside, []byte("package secret // the-secret-text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link.go")); err != nil {
		t.Fatal(err)
	}
	root, svc := mount(t, lsp.Config{Servers: []lsp.Server{goServer(t)}})
	r := call(t, root, svc, ws, "lsp_hover", m{"path": "link.go", "line": 1, "symbol": "nothere"})
	if !r.IsError || strings.Contains(r.Content, "the-secret-text") || !strings.Contains(r.Content, "cannot read link.go") {
		t.Fatalf("a symlink out of the workspace must be refused without its text: %s", r.Content)
	}

	r = call(t, root, svc, ws, "lsp_definition", m{"path": "main.go", "line": 6, "symbol": "Println"})
	if r.IsError || !strings.Contains(r.Content, "/src/fmt/print.go:") {
		t.Fatalf("definition of Println: %s", r.Content)
	}
	if strings.Contains(r.Content, "func Println") {
		t.Fatalf("a location outside the workspace must not carry its text: %s", r.Content)
	}
}
