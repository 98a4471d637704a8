package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/session"
)

// The tests in this file rewind sessions whose turns ran the sandboxed
// bash: they need tools.bash and session.checkpoints linked into dsh.

// bashChanges creates, changes, deletes and re-modes untracked and
// git-ignored files, in one command.
const bashChanges = `echo changed > tracked.txt && chmod 0755 tracked.txt && rm old.txt && echo new > new.txt && ` +
	`mkdir -p ignored/deep && printf cache2 > ignored/cache.bin && chmod 0644 ignored/cache.bin && ` +
	`echo fresh > ignored/deep/x && rm ignored/gone.txt && rmdir emptydir && ln -s tracked.txt link`

// rewindConfig writes a config whose agent coder works in ws with bash
// and checkpoints, its sessions in dir/sessions; with script, the model
// runs bashChanges and then says done, without it, it echoes.
func rewindConfig(t *testing.T, dir, ws string, script bool) string {
	t.Helper()
	replies := ""
	if script {
		args, _ := json.Marshal(map[string]string{"command": bashChanges})
		replies = "    config:\n      replies:\n        - text: \"changing \"\n          tool_calls: [{name: bash, arguments: '" + string(args) + "'}]\n        - text: done\n"
	}
	text := "plugins:\n  - use: llm.scripted\n" + replies +
		"  - use: session.jsonl\n    config: {dir: " + filepath.Join(dir, "sessions") + "}\n" +
		"presets:\n  coding:\n    - use: tools.bash\n    - use: session.checkpoints\n      config: {exclude: [\"*.tmp\"]}\n" +
		"agents:\n  - id: coder\n    provider: scripted\n    preset: coding\n    workspace: " + ws + "\nlog:\n  level: warn\n"
	name := "echo.yaml"
	if script {
		name = "script.yaml"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tree is a workspace's state: per path, its kind, mode and content.
func tree(t *testing.T, ws string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		if rel == "." {
			return nil
		}
		if d.Name() == ".git" {
			return fs.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link -> " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			data, _ := os.ReadFile(p)
			out[rel] = fi.Mode().Perm().String() + " " + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s is %q, want %q", what, p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s is there (%q) and should not be", what, p, g)
		}
	}
}

func writeFiles(t *testing.T, ws string, files map[string]string, mode fs.FileMode) {
	t.Helper()
	for p, content := range files {
		abs := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(abs, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRewindRestoresWhatBashChanged: a turn's sandboxed bash command
// creates, changes and deletes untracked and git-ignored files; `dsh
// sessions rewind --code` restores the workspace exactly (content and
// mode) from the folder store, on a session resumed from it; --redo puts
// the command's changes back; a file changed by hand since stops the next
// rewind, which names it, until --force.
func TestRewindRestoresWhatBashChanged(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	if git, err := exec.LookPath("git"); err == nil {
		if out, err := exec.Command(git, "init", "-q", ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
	}
	writeFiles(t, ws, map[string]string{"tracked.txt": "tracked\n", "old.txt": "old\n", ".gitignore": "ignored/\n*.tmp\n"}, 0o644)
	writeFiles(t, ws, map[string]string{"ignored/cache.bin": "cache1", "ignored/gone.txt": "gone"}, 0o600)
	writeFiles(t, ws, map[string]string{"scratch.tmp": "excluded"}, 0o644)
	if err := os.Mkdir(filepath.Join(ws, "emptydir"), 0o750); err != nil {
		t.Fatal(err)
	}
	initial := tree(t, ws)

	o := runDsh(t, "", "run", "--config", rewindConfig(t, dir, ws, true), "--session", "rw", "--allow", "bash", "-p", "change things")
	if o.code != 0 || !strings.Contains(o.stdout, "done") {
		t.Fatalf("turn 1: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	changed := tree(t, ws)
	if changed["tracked.txt"] != "-rwxr-xr-x changed\n" || changed["link"] != "link -> tracked.txt" || changed["ignored/deep/x"] != "-rw-r--r-- fresh\n" {
		t.Fatalf("bash did not run as scripted: %v\nstderr %q", changed, o.stderr)
	}
	echo := rewindConfig(t, dir, ws, false)
	if o := runDsh(t, "", "run", "--config", echo, "--session", "rw", "-p", "second turn"); o.code != 0 {
		t.Fatalf("turn 2: exit %d\nstderr %q", o.code, o.stderr)
	}

	list := runDsh(t, "", "sessions", "--config", echo, "rewind", "rw")
	if list.code != 0 || !strings.Contains(list.stdout, "1.1") || !strings.Contains(list.stdout, "bash workspace") || !strings.Contains(list.stdout, "second turn") {
		t.Fatalf("listing: exit %d\nstdout %q\nstderr %q", list.code, list.stdout, list.stderr)
	}

	o = runDsh(t, "", "sessions", "--config", echo, "rewind", "rw", "--to", "1", "--code")
	if o.code != 0 {
		t.Fatalf("rewind: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	sameTree(t, "after the rewind", tree(t, ws), initial)

	o = runDsh(t, "", "sessions", "--config", echo, "rewind", "rw", "--redo")
	if o.code != 0 {
		t.Fatalf("redo: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	sameTree(t, "after the redo", tree(t, ws), changed)

	// Changed underneath: refused, naming the file, until forced.
	writeFiles(t, ws, map[string]string{"new.txt": "edited by hand\n"}, 0o644)
	o = runDsh(t, "", "sessions", "--config", echo, "--json", "rewind", "rw", "--to", "1", "--code")
	if o.code != exitError || !strings.Contains(o.stderr, "REWIND_WORKSPACE_CHANGED") || !strings.Contains(o.stderr, "new.txt: changed since") {
		t.Fatalf("rewind over a changed file: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	if got := tree(t, ws)["new.txt"]; got != "-rw-r--r-- edited by hand\n" {
		t.Fatalf("a refused rewind changed new.txt to %q", got)
	}
	o = runDsh(t, "", "sessions", "--config", echo, "--json", "rewind", "rw", "--to", "1", "--code", "--force")
	if o.code != 0 {
		t.Fatalf("forced rewind: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	var ev session.Event
	if err := json.Unmarshal([]byte(o.stdout), &ev); err != nil || ev.Type != session.Rewound || !ev.Rewind.Forced ||
		len(ev.Rewind.Differed) != 1 || ev.Rewind.Conversation {
		t.Fatalf("forced rewind recorded %+v (%v)\n%s", ev.Rewind, err, o.stdout)
	}
	sameTree(t, "after the forced rewind", tree(t, ws), initial)
}

// TestRewindConversationOnly: rewinding the conversation leaves the
// workspace alone, and the turns it undid leave the listing; a redo
// brings them back.
func TestRewindConversationOnly(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	writeFiles(t, ws, map[string]string{"tracked.txt": "tracked\n", "old.txt": "old\n", "ignored/gone.txt": "gone"}, 0o644)
	if err := os.Mkdir(filepath.Join(ws, "emptydir"), 0o750); err != nil {
		t.Fatal(err)
	}
	script, echo := rewindConfig(t, dir, ws, true), rewindConfig(t, dir, ws, false)
	if o := runDsh(t, "", "run", "--config", script, "--session", "cv", "--allow", "bash", "-p", "change things"); o.code != 0 {
		t.Fatalf("turn 1: exit %d\nstderr %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "run", "--config", echo, "--session", "cv", "-p", "second turn"); o.code != 0 {
		t.Fatalf("turn 2: exit %d\nstderr %q", o.code, o.stderr)
	}
	changed := tree(t, ws)
	o := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv", "--to", "1", "--conversation")
	if o.code != 0 || !strings.Contains(o.stdout, "rewound the conversation to before turn 1") {
		t.Fatalf("rewind: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	sameTree(t, "after a conversation rewind", tree(t, ws), changed)
	if l := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv"); l.stdout != "nothing to rewind to yet\n" {
		t.Fatalf("the undone turns are still listed: %q %q", l.stdout, l.stderr)
	}
	// A rewound-away turn is no point to rewind to.
	if o := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv", "--to", "2"); o.code != exitUsage || !strings.Contains(o.stderr, "REWIND_BAD_POINT") {
		t.Fatalf("rewind to an undone turn: exit %d\nstderr %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv", "--redo"); o.code != 0 {
		t.Fatalf("redo: exit %d\nstderr %q", o.code, o.stderr)
	}
	if l := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv"); !strings.Contains(l.stdout, "change things") || !strings.Contains(l.stdout, "second turn") {
		t.Fatalf("the redo did not bring the turns back: %q %q", l.stdout, l.stderr)
	}
	// A turn after a rewind leaves nothing to redo.
	if o := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv", "--to", "2", "--conversation"); o.code != 0 {
		t.Fatalf("second rewind: exit %d\nstderr %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "run", "--config", echo, "--session", "cv", "-p", "third turn"); o.code != 0 {
		t.Fatalf("turn 3: exit %d\nstderr %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv", "--redo"); o.code != exitError || !strings.Contains(o.stderr, "REWIND_NOTHING_TO_REDO") {
		t.Fatalf("redo after a turn: exit %d\nstderr %q", o.code, o.stderr)
	}
	l := runDsh(t, "", "sessions", "--config", echo, "rewind", "cv")
	if !strings.Contains(l.stdout, "change things") || strings.Contains(l.stdout, "second turn") || !strings.Contains(l.stdout, "third turn") {
		t.Fatalf("listing after a rewind and a turn: %q", l.stdout)
	}
}

// TestSlashRewindAndRedo: in the interactive terminal, /rewind lists the
// checkpoints, /rewind 1 code removes the file the turn wrote, /redo
// writes it back.
func TestSlashRewindAndRedo(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: write, arguments: '{"path": "note.txt", "content": "v1"}'}]
        - text: written
presets:
  coding:
    - use: tools.files
    - use: session.checkpoints
agents:
  - id: main
    provider: scripted
    preset: coding
    workspace: `+ws+`
log:
  level: warn
`), 0o644)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	note := filepath.Join(ws, "note.txt")

	io.WriteString(tty, "make a note\r")
	pos = scr.waitFor(t, pos, "written")
	pos = scr.waitFor(t, pos, "> ")
	if data, err := os.ReadFile(note); err != nil || string(data) != "v1" {
		t.Fatalf("note.txt: %q %v", data, err)
	}
	io.WriteString(tty, "/rewind\r")
	pos = scr.waitFor(t, pos, "1.1    write note.txt")
	pos = scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "/rewind 1 code\r")
	pos = scr.waitFor(t, pos, "rewound the workspace (0 restored, 1 removed) to before turn 1")
	pos = scr.waitFor(t, pos, "> ")
	if _, err := os.Stat(note); !os.IsNotExist(err) {
		t.Fatalf("note.txt after /rewind: %v", err)
	}
	io.WriteString(tty, "/redo\r")
	pos = scr.waitFor(t, pos, "redid the rewind")
	scr.waitFor(t, pos, "> ")
	if data, err := os.ReadFile(note); err != nil || string(data) != "v1" {
		t.Fatalf("note.txt after /redo: %q %v", data, err)
	}
	leaveWithCtrlD(t, tty, cmd, scr)
}
