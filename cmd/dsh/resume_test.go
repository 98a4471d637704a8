package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// storeConfig writes a config with the echoing scripted model, a
// session.jsonl store in dir/sessions and the agents named.
func storeConfig(t *testing.T, dir string, agents ...string) string {
	t.Helper()
	cfg := "plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: " + filepath.Join(dir, "sessions") + "}\nagents:\n"
	for _, a := range agents {
		cfg += "  - id: " + a + "\n    provider: scripted\n"
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg+"log:\n  level: warn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// opened is the first line of a --json run.
type opened struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Agent     string `json:"agent"`
	Resumed   bool   `json:"resumed"`
}

// jsonRun runs dsh run --json with args and returns its first and last
// lines, failing unless it exits 0.
func jsonRun(t *testing.T, args ...string) (first opened, last map[string]any, o outcome) {
	t.Helper()
	o = runDsh(t, "", append([]string{"run", "--json"}, args...)...)
	if o.code != 0 {
		t.Fatalf("dsh run --json %v: exit %d\n%s", args, o.code, o.stderr)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Type != "session/opened" {
		t.Fatalf("first line %q is not session/opened (%v)", lines[0], err)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	return first, last, o
}

// prompts returns the user prompts a stored session holds, in order.
func prompts(t *testing.T, dir, id string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "sessions", id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Type    string `json:"type"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if e.Type == "user/message" {
			out = append(out, e.Message.Content)
		}
	}
	return out
}

// TestSessionFlagCreatesThenResumes: --session names a session that is not
// stored yet, so the first run creates it under that id and the second
// continues it; both say so in the session/opened line, end with the id on
// stderr and agree with the closing session/usage line.
func TestSessionFlagCreatesThenResumes(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(t, dir, "main")
	for i, want := range []bool{false, true} {
		first, last, o := jsonRun(t, "--config", cfg, "--session", "nightly", "-p", fmt.Sprintf("prompt %d", i+1))
		if first != (opened{"session/opened", "nightly", "main", want}) {
			t.Fatalf("run %d: first line %+v, want resumed=%v", i+1, first, want)
		}
		if last["type"] != "session/usage" || last["session_id"] != "nightly" {
			t.Fatalf("run %d: last line %v", i+1, last)
		}
		if !strings.Contains(o.stderr, "dsh: session nightly; continue it with: dsh run --session nightly\n") {
			t.Fatalf("run %d: stderr %q does not end with the session id", i+1, o.stderr)
		}
	}
	if got := prompts(t, dir, "nightly"); strings.Join(got, "|") != "prompt 1|prompt 2" {
		t.Fatalf("the session holds %q", got)
	}
	// A run without a flag starts a session of its own and says which.
	o := runDsh(t, "", "run", "--config", cfg, "-p", "hi")
	if o.code != 0 || !strings.Contains(o.stderr, "dsh: session main-session-") || strings.Contains(o.stderr, "session nightly") {
		t.Fatalf("plain run: exit %d, stderr %q", o.code, o.stderr)
	}
}

// TestResumedRunSendsTheHistory: the second run of a session asks the
// model with the first run's prompt and answer before its own prompt.
func TestResumedRunSendsTheHistory(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		data, _ := os.ReadFile("../../plugins/llm/openai/testdata/text.sse")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(data)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.deepseek
    config: {base_url: `+srv.URL+`, api_key_env: LOCAL_DEEPSEEK_KEY, model: deepseek-chat}
  - use: session.jsonl
    config: {dir: `+filepath.Join(dir, "sessions")+`}
agents:
  - id: main
    provider: deepseek
log:
  level: warn
`), 0o644)
	t.Setenv("LOCAL_DEEPSEEK_KEY", "sk-local")
	for _, p := range []string{"my name is Ada", "what is my name?"} {
		if o := runDsh(t, "", "run", "--config", cfg, "--session", "talk", "-p", p); o.code != 0 || o.stdout != "Hello, world\n" {
			t.Fatalf("-p %q: exit %d\nstdout %q\nstderr %q", p, o.code, o.stdout, o.stderr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d model requests, want 2", len(bodies))
	}
	var second struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(bodies[1], &second); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, m := range second.Messages {
		if m.Role != "system" {
			seen = append(seen, m.Role+": "+m.Content)
		}
	}
	want := "user: my name is Ada|assistant: Hello, world|user: what is my name?"
	if strings.Join(seen, "|") != want {
		t.Fatalf("the resumed run asked the model with\n%q\nwant\n%q", strings.Join(seen, "|"), want)
	}
}

// TestSessionRunsWithItsOwnAgent: a stored session runs with the agent
// that wrote it, not the default; --agent naming another one is refused
// before anything opens.
func TestSessionRunsWithItsOwnAgent(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(t, dir, "main", "reviewer")
	if first, _, _ := jsonRun(t, "--config", cfg, "--agent", "reviewer", "--session", "rev", "-p", "look"); first.Agent != "reviewer" || first.Resumed {
		t.Fatalf("create: %+v", first)
	}
	if first, _, _ := jsonRun(t, "--config", cfg, "--session", "rev", "-p", "again"); first.Agent != "reviewer" || !first.Resumed {
		t.Fatalf("resume without --agent: %+v", first)
	}
	o := runDsh(t, "", "run", "--config", cfg, "--agent", "main", "--session", "rev", "-p", "hijack")
	if o.code != 2 || !strings.Contains(o.stderr, `session "rev" belongs to agent "reviewer", not "main"`) || o.stdout != "" {
		t.Fatalf("--agent mismatch: exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	if got := prompts(t, dir, "rev"); strings.Join(got, "|") != "look|again" {
		t.Fatalf("the session holds %q", got)
	}
}

// TestContinueTakesTheAgentsLatestRootSession: --continue skips other
// agents' sessions and subagent sessions, however recent.
func TestContinueTakesTheAgentsLatestRootSession(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(t, dir, "main", "reviewer", "idle")
	for _, run := range [][]string{
		{"--session", "older"},
		{"--session", "newer"},
		{"--session", "newer.sub-1"}, // a subagent session of newer, by its id
		{"--agent", "reviewer", "--session", "theirs"},
	} {
		if o := runDsh(t, "", append(append([]string{"run", "--config", cfg}, run...), "-p", "x")...); o.code != 0 {
			t.Fatalf("%v: exit %d: %s", run, o.code, o.stderr)
		}
	}
	if first, _, _ := jsonRun(t, "--config", cfg, "--continue", "-p", "go on"); first.SessionID != "newer" || !first.Resumed || first.Agent != "main" {
		t.Fatalf("--continue opened %+v, want newer", first)
	}
	if first, _, _ := jsonRun(t, "--config", cfg, "-c", "--agent", "reviewer", "-p", "go on"); first.SessionID != "theirs" {
		t.Fatalf("--continue --agent reviewer opened %+v", first)
	}
	o := runDsh(t, "", "run", "--config", cfg, "--continue", "--agent", "idle", "-p", "x")
	if o.code != exitNotFound || !strings.Contains(o.stderr, `no session of agent "idle" is stored; start one with dsh run --agent idle`) {
		t.Fatalf("--continue with none stored: exit %d, stderr %q", o.code, o.stderr)
	}
	o = runDsh(t, "", "run", "--config", cfg, "--continue", "--session", "older", "-p", "x")
	if o.code != exitUsage || !strings.Contains(o.stderr, "--session and --continue both pick the session") {
		t.Fatalf("--continue --session: exit %d, stderr %q", o.code, o.stderr)
	}
	if got := prompts(t, dir, "older"); len(got) != 1 {
		t.Fatalf("older was written to: %q", got)
	}
}

// TestSessionOpenElsewhereIsRefused holds a session's lock the way another
// dsh does: --session and --continue both exit 1 naming the holder, and
// the log is left as it was.
func TestSessionOpenElsewhereIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(t, dir, "main")
	if o := runDsh(t, "", "run", "--config", cfg, "--session", "busy", "-p", "first"); o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	log := filepath.Join(dir, "sessions", "busy.jsonl")
	before := mustRead(t, log)
	lock, err := os.OpenFile(filepath.Join(dir, "sessions", "busy.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, `{"pid":%d,"host":"elsewhere"}`, os.Getpid())
	for _, args := range [][]string{{"--session", "busy"}, {"--continue", "--json"}} {
		o := runDsh(t, "", append(append([]string{"run", "--config", cfg}, args...), "-p", "second")...)
		holder := fmt.Sprintf(`is in use by process %d on host "elsewhere"`, os.Getpid())
		if o.code != exitError || !strings.Contains(o.stderr, `session "busy" was not opened and nothing was written to it`) ||
			!strings.Contains(o.stderr, "SESSION_LOCKED") || !strings.Contains(o.stderr, holder) || o.stdout != "" {
			t.Fatalf("%v: exit %d\nstdout %q\nstderr %q", args, o.code, o.stdout, o.stderr)
		}
	}
	if after := mustRead(t, log); after != before {
		t.Fatalf("the locked session's log changed:\n%s", after)
	}
}

// TestSessionFlagsNeedAStore: without a persistence plugin both flags are
// a config error that says which plugin to add; a plain run still works
// and says its session is not stored.
func TestSessionFlagsNeedAStore(t *testing.T) {
	cfg := writeConfig(t, "        - text: hi\n", "")
	for _, args := range [][]string{{"--session", "s"}, {"--continue"}} {
		o := runDsh(t, "", append(append([]string{"run", "--config", cfg}, args...), "-p", "x")...)
		if o.code != exitUsage || !strings.Contains(o.stderr, "SESSION_NO_PERSISTENCE: "+args[0]+" needs a plugin that persists sessions") ||
			!strings.Contains(o.stderr, "use: session.jsonl") {
			t.Fatalf("%v: exit %d, stderr %q", args, o.code, o.stderr)
		}
	}
	o := runDsh(t, "", "run", "--config", cfg, "-p", "x")
	if o.code != 0 || !strings.Contains(o.stderr, "(not stored: add a plugin that persists sessions, such as session.jsonl") {
		t.Fatalf("plain run: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "run", "--config", cfg, "--session", " ", "-p", "x"); o.code != exitUsage || !strings.Contains(o.stderr, "--session was given an empty id") {
		t.Fatalf("--session \" \": exit %d, stderr %q", o.code, o.stderr)
	}
}

// TestInteractiveSessionFlag: an interactive run continues the named
// session, shows its history's size, and ends with its id.
func TestInteractiveSessionFlag(t *testing.T) {
	dir := t.TempDir()
	cfg := storeConfig(t, dir, "main")
	if o := runDsh(t, "", "run", "--config", cfg, "--session", "chat", "-p", "remember me"); o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	cmd := exec.Command(dshBin, "run", "--config", cfg, "--continue")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{}
	go io.Copy(scr, tty)
	pos := scr.waitFor(t, 0, "Session chat resumed with 2 messages.")
	io.WriteString(tty, "and this\r")
	pos = scr.waitFor(t, pos, "You said: and this")
	scr.waitFor(t, pos, "> ")
	leaveWithCtrlD(t, tty, cmd, scr)
	scr.waitFor(t, pos, "dsh: session chat; continue it with: dsh run --session chat")
	if got := prompts(t, dir, "chat"); strings.Join(got, "|") != "remember me|and this" {
		t.Fatalf("the session holds %q", got)
	}
}

// TestReloadKeepsTheChosenSession: when --watch restarts the agent with
// new settings, the agent reopens the session --session chose, not a
// fresh one.
func TestReloadKeepsTheChosenSession(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	base := `plugins:
  - id: a
    use: llm.scripted
    config: {name: a, replies: [{text: answered by a}]}
  - id: b
    use: llm.scripted
    config: {name: b, replies: [{text: answered by b}]}
  - use: session.jsonl
    config: {dir: ` + filepath.Join(dir, "sessions") + `}
agents:
  - id: main
    provider: a
log:
  level: warn
`
	os.WriteFile(cfg, []byte(base), 0o644)
	cmd := exec.Command(dshBin, "run", "--watch", "--config", cfg, "--session", "kept")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{}
	go io.Copy(scr, tty)
	pos := scr.waitFor(t, 0, "> ")
	io.WriteString(tty, "hello\r")
	pos = scr.waitFor(t, pos, "answered by a")
	pos = scr.waitFor(t, pos, "> ")

	os.WriteFile(cfg, []byte(strings.Replace(base, "provider: a", "provider: b", 1)), 0o644)
	pos = scr.waitFor(t, pos, "(config reloaded; agent main restarted")
	io.WriteString(tty, "hello again\r")
	pos = scr.waitFor(t, pos, "answered by b")
	scr.waitFor(t, pos, "> ")
	leaveWithCtrlD(t, tty, cmd, scr)
	scr.waitFor(t, pos, "dsh: session kept;")
	if got := prompts(t, dir, "kept"); strings.Join(got, "|") != "hello|hello again" {
		t.Fatalf("the chosen session holds %q", got)
	}
}

// TestSessionFlagRepairsAnInterruptedTurn: dsh killed in the middle of a
// turn of --session s; the next --session s run closes that turn, says
// so right after the session/opened line, and the new turn completes.
func TestSessionFlagRepairsAnInterruptedTurn(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "        - text: \"a slow answer\"\n      delay: 150ms\n",
		fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", filepath.Join(dir, "sessions")))
	cmd := exec.Command(dshBin, "run", "--config", cfg, "--session", "cut", "-p", "remember the milk")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	// The first streamed byte comes after the prompt's checkpoint.
	if _, err := stdout.Read(make([]byte, 1)); err != nil {
		t.Fatalf("no answer streamed before the kill: %v", err)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	o := runDsh(t, "", "run", "--config", cfg, "--session", "cut", "--json", "-p", "next")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if o.code != 0 || len(lines) < 3 {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
	var first opened
	var second struct {
		Type   string `json:"type"`
		Prompt struct {
			Content string `json:"content"`
		} `json:"prompt"`
	}
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	if first != (opened{"session/opened", "cut", "main", true}) || second.Type != "session/interrupted" || second.Prompt.Content != "remember the milk" {
		t.Fatalf("first lines:\n%s\n%s", lines[0], lines[1])
	}
	if got := prompts(t, dir, "cut"); strings.Join(got, "|") != "remember the milk|next" {
		t.Fatalf("the session holds %q", got)
	}
}
