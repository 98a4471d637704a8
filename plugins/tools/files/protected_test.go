package files_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugins/tools/files"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
)

const gitConfig = "[core]\n\tbare = false\n"

type m = map[string]any

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// protectedWorkspace is a workspace with a git repository, a settings
// folder and instructions, as a model would find one.
func protectedWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	for p, content := range map[string]string{
		".git/config":           gitConfig,
		".git/HEAD":             "ref: refs/heads/main\n",
		".claude/settings.json": "{}\n",
		"AGENTS.md":             "be careful\n",
		"sub/.git/config":       gitConfig,
		"src/main.go":           "package main\n",
	} {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// execAs runs one call of agent "a" through the whole pipeline.
func execAs(t *testing.T, root *dshctx.Context, svc *tools.Service, ws, name string, args any) tools.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	r, err := svc.Execute(stdctx.Background(), root, tools.Call{AgentID: "a", ID: "c1", Name: name, Arguments: raw, Workspace: ws})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func TestProtectedPathsAreRefusedWithNobodyToAsk(t *testing.T) {
	root, svc := mount(t, nil)
	ws := protectedWorkspace(t)
	if err := os.Symlink(".git", filepath.Join(ws, "gitdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/config", filepath.Join(ws, "cfg")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(ws, "src", "up")); err != nil {
		t.Fatal(err)
	}
	planted := `{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}`
	for _, c := range []struct {
		tool string
		args m
		what string
	}{
		{"write", m{"path": ".git/config", "content": "[core]\n\tfsmonitor = \"touch /tmp/pwned\"\n"}, "git's configuration"},
		{"write", m{"path": "./.git//config", "content": "x"}, "git's configuration"},
		{"write", m{"path": "src/../.git/config", "content": "x"}, "git's configuration"},
		{"write", m{"path": ws + "/.git/config", "content": "x"}, "git's configuration"},
		{"write", m{"path": ".GIT/config", "content": "x"}, "git's configuration"},
		{"write", m{"path": "gitdir/config", "content": "x"}, "git's configuration"},
		{"write", m{"path": "cfg", "content": "x"}, "git's configuration"},
		{"write", m{"path": "src/up/.git/config", "content": "x"}, "git's configuration"},
		{"write", m{"path": "gitdir/hooks/pre-commit", "content": "#!/bin/sh\ntouch /tmp/pwned\n"}, "git's hooks"},
		{"write", m{"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\n"}, "git's hooks"},
		{"write", m{"path": ".git/info/attributes", "content": "* filter=x\n"}, "per-repository rules"},
		{"write", m{"path": ".git", "content": "gitdir: /tmp/evil\n"}, "repository data"},
		{"write", m{"path": "sub/.git/config", "content": "x"}, "git's configuration"},
		{"write", m{"path": ".claude/settings.json", "content": planted}, ".claude/settings.json"},
		{"write", m{"path": ".agents/skills/x/SKILL.md", "content": "x"}, "skills"},
		{"write", m{"path": ".mcp.json", "content": "{}"}, "MCP server"},
		{"edit", m{"path": "AGENTS.md", "old": "careful", "new": "reckless"}, "agent instructions"},
		{"edit", m{"path": "cfg", "old": "bare", "new": "fsmonitor"}, "git's configuration"},
	} {
		r := execAs(t, root, svc, ws, c.tool, c.args)
		if !r.IsError || !strings.Contains(r.Content, c.what) || !strings.Contains(r.Content, "nobody is attached") {
			t.Errorf("%s %v: want a refusal naming %q with nobody to ask, got %+v", c.tool, c.args, c.what, r)
		}
	}
	// A hard link is the same file under an innocent name: refused for
	// having two names, before any question.
	if err := os.Link(filepath.Join(ws, ".git", "config"), filepath.Join(ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if r := execAs(t, root, svc, ws, "write", m{"path": "notes.txt", "content": "[core]\n\tfsmonitor = x\n"}); !r.IsError || !strings.Contains(r.Content, "hard link") {
		t.Errorf("a hard link to .git/config: %+v", r)
	}
	for p, want := range map[string]string{".git/config": gitConfig, "sub/.git/config": gitConfig, ".claude/settings.json": "{}\n", "AGENTS.md": "be careful\n"} {
		if got := readFile(t, filepath.Join(ws, p)); got != want {
			t.Errorf("%s changed: %q", p, got)
		}
	}
	for _, p := range []string{".git/hooks", ".git/info", ".agents", ".mcp.json"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); !os.IsNotExist(err) {
			t.Errorf("%s was made by a refused write (%v)", p, err)
		}
	}
	// Reads stay allowed, and so do ordinary writes.
	if r := execAs(t, root, svc, ws, "read", m{"path": ".git/config"}); r.IsError || !strings.Contains(r.Content, "bare = false") {
		t.Fatalf("read .git/config: %+v", r)
	}
	if r := execAs(t, root, svc, ws, "write", m{"path": "src/new.go", "content": "package main\n"}); r.IsError {
		t.Fatalf("an ordinary write: %+v", r)
	}
}

func TestProtectedWriteIsAskedAboutWhenSomeoneIsAttached(t *testing.T) {
	root, svc := mount(t, nil)
	ws := protectedWorkspace(t)
	appr, err := approval.Key.Get(root)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []approval.Request
	choice := approval.Deny
	detach, err := appr.Attach("a", func(_ stdctx.Context, req approval.Request) (approval.Answer, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		return approval.Answer{Choice: choice, Reason: "not today"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()

	fsmonitor := "[core]\n\tfsmonitor = \"touch /tmp/pwned\"\n"
	r := execAs(t, root, svc, ws, "write", m{"path": ".git/config", "content": fsmonitor})
	if !r.IsError || !strings.Contains(r.Content, "not today") || readFile(t, filepath.Join(ws, ".git/config")) != gitConfig {
		t.Fatalf("denied write: %+v", r)
	}
	if len(asked) != 1 || !strings.Contains(asked[0].Reason, "`.git/config` is git's configuration: a change can make git run commands outside the sandbox") ||
		asked[0].Pattern != "protected:.git/config" || asked[0].Tool != "write" {
		t.Fatalf("the question: %+v", asked)
	}
	choice = approval.AllowOnce
	if r := execAs(t, root, svc, ws, "write", m{"path": ".git/config", "content": fsmonitor}); r.IsError {
		t.Fatalf("approved write: %+v", r)
	}
	if readFile(t, filepath.Join(ws, ".git/config")) != fsmonitor {
		t.Fatal("the approved write did not land")
	}
	// Ordinary files are not asked about.
	n := len(asked)
	execAs(t, root, svc, ws, "write", m{"path": "src/main.go", "content": "package x\n"})
	if len(asked) != n {
		t.Fatalf("an ordinary write was asked about: %+v", asked[n:])
	}
}

func TestProtectedListIsTheTreesAndTheLiftIsTheConfigs(t *testing.T) {
	root, svc := mount(t, nil)
	ws := protectedWorkspace(t)
	hooksFile := filepath.Join(ws, "hooks.json")
	if err := os.WriteFile(hooksFile, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := execAs(t, root, svc, ws, "write", m{"path": "hooks.json", "content": "{}"}); r.IsError {
		t.Fatalf("not yet protected: %+v", r)
	}
	if err := protect.Register(root, protect.Entry{Path: hooksFile, What: "a hooks file of dsh"}); err != nil {
		t.Fatal(err)
	}
	if r := execAs(t, root, svc, ws, "write", m{"path": "hooks.json", "content": "{}"}); !r.IsError || !strings.Contains(r.Content, "a hooks file of dsh") {
		t.Fatalf("a registered file: %+v", r)
	}

	root2, svc2 := mount(t, files.Config{ProtectedWrites: files.ProtectedAllow})
	_ = root2
	if r := execAs(t, root2, svc2, ws, "write", m{"path": ".git/config", "content": "x"}); r.IsError {
		t.Fatalf("protected_writes allow: %+v", r)
	}
	// The second tree's list never saw the first tree's registration.
	l2, _ := protect.Key.Get(root2)
	if _, hit := l2.Match(ws, hooksFile); hit {
		t.Fatal("a registration leaked into another tree's list")
	}
}

func TestProtectedWriteFromAnUnattendedTurnIsRefused(t *testing.T) {
	root, svc := mount(t, nil)
	ws := protectedWorkspace(t)
	appr, _ := approval.Key.Get(root)
	detach, err := appr.Attach("a", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	raw, _ := json.Marshal(m{"path": ".git/config", "content": "x"})
	r, err := svc.Execute(stdctx.Background(), root, tools.Call{AgentID: "a", Name: "write", Arguments: raw, Workspace: ws, Unattended: true})
	if err != nil || !r.IsError || !strings.Contains(r.Content, "unattended") {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestSecretPathsAreNotRead: serve's token and a session store in the
// workspace, marked secret, are hidden from a bash command; the file
// tools must not hand them to the model either: read, edit and grep
// refuse them by name and through a symlink, grep's and glob's walks and
// list leave them out, and the rest of the workspace still shows.
func TestSecretPathsAreNotRead(t *testing.T) {
	root, svc := mount(t, nil)
	ws := protectedWorkspace(t)
	const secret = "tok-5e3c7e7-not-a-real-token"
	if err := os.MkdirAll(filepath.Join(ws, ".dsh/serve"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".dsh/serve/token", "sessions.db"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sessions.db", filepath.Join(ws, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "src/plain.txt"), []byte("tok-5e3c7e7 in plain sight\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := protect.Register(root,
		protect.Entry{Path: filepath.Join(ws, ".dsh/serve"), What: "serve's state", Secret: true},
		protect.Entry{Path: filepath.Join(ws, "sessions.db"), What: "a session store", Secret: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool string
		args m
	}{
		{"read", m{"path": ".dsh/serve/token"}},
		{"read", m{"path": "sessions.db"}},
		{"read", m{"path": "notes.txt"}},
		{"edit", m{"path": "sessions.db", "old": secret, "new": "x"}},
		{"grep", m{"pattern": "tok-", "path": "sessions.db"}},
		{"list", m{"path": ".dsh/serve"}},
	} {
		r := execAs(t, root, svc, ws, c.tool, c.args)
		if !r.IsError || strings.Contains(r.Content, secret) || !strings.Contains(r.Content, "keeps from the model") {
			t.Errorf("%s %v: want a refusal that shows nothing of the secret: %+v", c.tool, c.args, r)
		}
	}
	for _, c := range []struct {
		tool string
		args m
		want string
	}{
		{"grep", m{"pattern": "tok-"}, "src/plain.txt"},
		{"glob", m{"pattern": "**/*"}, "src/main.go"},
		{"list", m{"path": "."}, "src/"},
		{"list", m{"path": ".dsh"}, "empty"},
	} {
		r := execAs(t, root, svc, ws, c.tool, c.args)
		if r.IsError || strings.Contains(r.Content, secret) || strings.Contains(r.Content, "sessions.db") || strings.Contains(r.Content, "token") || !strings.Contains(r.Content, c.want) {
			t.Errorf("%s %v: want %q shown and no secret: %+v", c.tool, c.args, c.want, r)
		}
	}
	if readFile(t, filepath.Join(ws, "sessions.db")) != secret+"\n" {
		t.Fatal("the session store changed")
	}
}
