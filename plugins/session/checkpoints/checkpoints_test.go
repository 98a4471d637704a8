package checkpoints_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

func call(name string, args map[string]string) scripted.Call {
	b, _ := json.Marshal(args)
	return scripted.Call{Name: name, Arguments: string(b)}
}

// TestFileToolsCheckpointTheirPath: write and edit record the path they
// name (its absence for a new file, and of the folders the write makes);
// a rewind to before step 2 undoes the edit, with the file's time, and
// keeps step 1's new file; a redo edits again; a rewind to the turn
// removes the new file and its new folder too.
func TestFileToolsCheckpointTheirPath(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("Helo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	then := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(ws, "keep.txt"), then, then); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, ws, true, "",
		scripted.Reply{ToolCalls: []scripted.Call{call("write", map[string]string{"path": "sub/new.txt", "content": "one\n"})}},
		scripted.Reply{ToolCalls: []scripted.Call{call("edit", map[string]string{"path": "keep.txt", "old": "Helo", "new": "Hello"})}},
		scripted.Reply{Text: "done"})
	r.prompt(t, "work")
	if read(t, ws, "keep.txt") != "Hello\n" || read(t, ws, "sub/new.txt") != "one\n" {
		t.Fatal("the turn did not write as scripted")
	}
	cps := r.checkpoints(t)
	if len(cps) != 2 {
		t.Fatalf("%d checkpoints, want 2: %+v", len(cps), cps)
	}
	if c := cps[0]; c.Step != 1 || c.Checkpoint.Tool != "write" || c.Checkpoint.Scope != "paths" || strings.Join(c.Checkpoint.Paths, ",") != "sub/new.txt,sub" || c.Checkpoint.Files != 0 {
		t.Fatalf("write's checkpoint: step %d %+v", c.Step, c.Checkpoint)
	}
	if c := cps[1]; c.Step != 2 || c.Checkpoint.Tool != "edit" || strings.Join(c.Checkpoint.Paths, ",") != "keep.txt" || c.Checkpoint.Files != 1 || c.Checkpoint.Bytes != 5 {
		t.Fatalf("edit's checkpoint: step %d %+v", c.Step, c.Checkpoint)
	}
	r.checkpointsPrecedeResults(t)

	res, err := r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1, Step: 2}, Code: true})
	if err != nil || res.Event.Rewind.Restored != 1 || res.Event.Rewind.Removed != 0 {
		t.Fatalf("rewind to 1.2: %+v %v", res.Event.Rewind, err)
	}
	if read(t, ws, "keep.txt") != "Helo\n" || read(t, ws, "sub/new.txt") != "one\n" {
		t.Fatalf("after the rewind to 1.2: keep.txt %q, new.txt %q", read(t, ws, "keep.txt"), read(t, ws, "sub/new.txt"))
	}
	if fi, _ := os.Stat(filepath.Join(ws, "keep.txt")); fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(then) {
		t.Fatalf("keep.txt came back with mode %v, modified %v (want %v)", fi.Mode(), fi.ModTime(), then)
	}
	if _, err := r.rewind(sessions.RewindRequest{Redo: true}); err != nil || read(t, ws, "keep.txt") != "Hello\n" {
		t.Fatalf("redo: %v, keep.txt %q", err, read(t, ws, "keep.txt"))
	}
	res, err = r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1}})
	if err != nil || res.Event.Rewind.Removed != 2 || !res.Event.Rewind.Conversation {
		t.Fatalf("rewind to 1: %+v %v", res.Event.Rewind, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "sub")); !os.IsNotExist(err) || read(t, ws, "keep.txt") != "Helo\n" {
		t.Fatalf("after the rewind to 1: the folder sub %v, keep.txt %q", err, read(t, ws, "keep.txt"))
	}
	if _, err := r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1}}); !errs.HasCode(err, session.RewindBadPoint) {
		t.Fatalf("rewinding to a turn the conversation no longer shows: %v", err)
	}
}

// TestSnapshotLeavesOutWhatItExcludes: bash's checkpoint leaves out .git,
// the exclude globs and files over max_file_bytes, says so in its record,
// and a rewind leaves them as bash made them while it restores the rest.
func TestSnapshotLeavesOutWhatItExcludes(t *testing.T) {
	ws := t.TempDir()
	for p, c := range map[string]string{"a.txt": "a1", "app.log": "log1", "big.bin": strings.Repeat("x", 2000), ".git/HEAD": "ref1", "node_modules/m.js": "m1"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := "echo a2 > a.txt && echo log2 > app.log && echo big2 > big.bin && echo m2 > node_modules/m.js"
	r := newRig(t, ws, true, "      config: {max_file_bytes: 1000, exclude: [\"*.log\", node_modules]}\n",
		scripted.Reply{ToolCalls: []scripted.Call{call("bash", map[string]string{"command": cmd})}},
		scripted.Reply{Text: "done"})
	r.prompt(t, "work")
	cps := r.checkpoints(t)
	if len(cps) != 1 || cps[0].Checkpoint.Scope != "workspace" {
		t.Fatalf("checkpoints: %+v", cps)
	}
	excluded := map[string]string{}
	for _, x := range cps[0].Checkpoint.Excluded {
		excluded[x.Path] = x.Reason
	}
	for p, why := range map[string]string{".git/": "git's own directory", "app.log": "exclude glob", "node_modules/": "exclude glob", "big.bin": "max_file_bytes"} {
		if !strings.Contains(excluded[p], why) {
			t.Errorf("excluded %q: %q, want it to say %q (all: %v)", p, excluded[p], why, excluded)
		}
	}
	if _, err := r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1}, Code: true}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a.txt": "a1", "app.log": "log2\n", "big.bin": "big2\n", ".git/HEAD": "ref1", "node_modules/m.js": "m2\n"} {
		if got := read(t, ws, p); got != want {
			t.Errorf("after the rewind %s holds %q, want %q", p, got, want)
		}
	}
}

// TestRewindOfASessionResumedFromJetStream: with session.nats, the
// checkpoints go to the JetStream object store with the session; a host
// that resumes the session after the first closed rewinds what the first
// one's bash changed.
func TestRewindOfASessionResumedFromJetStream(t *testing.T) {
	srv := natstest.Single(t)
	persist := "  - use: session.nats\n    config: {url: \"" + srv.ClientURL() + "\", stream: CP, subject_prefix: dsh.cp}\n"
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a1"), 0o640); err != nil {
		t.Fatal(err)
	}
	r := newRigOn(t, persist, ws, true, "",
		scripted.Reply{ToolCalls: []scripted.Call{call("bash", map[string]string{"command": "echo a2 > a.txt && echo b > b.txt"})}},
		scripted.Reply{Text: "done"})
	r.prompt(t, "work")
	r.close(t)
	if read(t, ws, "a.txt") != "a2\n" || read(t, ws, "b.txt") != "b\n" {
		t.Fatal("bash did not run as scripted")
	}
	r = newRigOn(t, persist, ws, true, "")
	if _, err := r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); !os.IsNotExist(err) || read(t, ws, "a.txt") != "a1" {
		t.Fatalf("after the rewind on the resuming host: a.txt %q, b.txt %v", read(t, ws, "a.txt"), err)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "a.txt")); fi.Mode().Perm() != 0o640 {
		t.Fatalf("a.txt came back with mode %v", fi.Mode())
	}
}

// TestRewindRefusesDuringATurn: a rewind while a turn runs is refused
// with REWIND_BUSY and changes nothing; after a cancel it goes ahead.
func TestRewindRefusesDuringATurn(t *testing.T) {
	ws := t.TempDir()
	r := newRig(t, ws, true, "",
		scripted.Reply{ToolCalls: []scripted.Call{call("bash", map[string]string{"command": "echo x > x.txt && sleep 30"})}},
		scripted.Reply{Text: "done"})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
	defer cancel()
	if _, err := r.h.Sessions().Prompt(ctx, r.id, sessions.PromptRequest{Content: "work"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); read(t, ws, "x.txt") != "x\n"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	if _, err := r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1}}); !errs.HasCode(err, sessions.RewindBusy) {
		t.Fatalf("a rewind during the turn: %v", err)
	}
	if err := r.h.Sessions().Cancel(ctx, r.id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.rewind(sessions.RewindRequest{To: session.Point{Turn: 1}, Code: true}); err != nil {
		t.Fatalf("a rewind after the cancel: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); !os.IsNotExist(err) {
		t.Fatalf("x.txt after the rewind: %v", err)
	}
}
