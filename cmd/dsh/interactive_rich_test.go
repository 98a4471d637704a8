package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The rich terminal is tested in tmux: tmux is a real terminal emulator,
// and capture-pane shows what a person sees — so "the status line is gone"
// is checked on the screen, not guessed from the bytes sent to it.

// tmuxTerm is one dsh run in a tmux pane of its own server.
type tmuxTerm struct {
	t    *testing.T
	sock string
}

// startTmux runs dsh with args in a 100x50 tmux pane, with colour on.
func startTmux(t *testing.T, args ...string) *tmuxTerm {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the rich terminal's tests need tmux (apt-get install tmux; .ci/run installs it)")
	}
	m := &tmuxTerm{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	// The pane stays after dsh exits, so its last screen can be read.
	run := "env -u NO_COLOR DSH_CONFIG= " + dshBin + " " + strings.Join(args, " ")
	m.tmux("-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "50", run+"; sleep 60")
	t.Cleanup(func() { exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	m.waitFor("the first prompt", func(s string) bool { return lastLine(s) == ">" })
	return m
}

func (m *tmuxTerm) tmux(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", m.sock}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// send types text and Enter.
func (m *tmuxTerm) send(text string) { m.tmux("send-keys", "-t", "0", "-l", text+"\r") }

// screen is what the pane shows; with escapes, its colours too.
func (m *tmuxTerm) screen(escapes bool) string {
	args := []string{"capture-pane", "-p", "-t", "0"}
	if escapes {
		args = append(args, "-e")
	}
	return m.tmux(args...)
}

// waitFor polls the screen until ok holds and returns that screen.
func (m *tmuxTerm) waitFor(what string, ok func(screen string) bool) string {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := m.screen(false)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the screen never showed %s; it shows:\n%s", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *tmuxTerm) waitForText(want string) string {
	m.t.Helper()
	return m.waitFor(fmt.Sprintf("%q", want), func(s string) bool { return strings.Contains(s, want) })
}

// lastLine is the screen's last line that is not blank.
func lastLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// statusLine matches the status line: spinner, what is happening, time.
var statusLine = regexp.MustCompile(`[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] (thinking|writing|reasoning|running [^·]*) · [0-9.m]+s`)

// TestRichStatusLineWhileModelAndToolWork: while a slow model thinks and a
// slow command runs, the screen's last line is a moving status line; when
// the turn ends it is gone, with no copy left behind, and the turn's line
// follows the answer. The config sets no log level: no log line reaches
// the conversation.
func TestRichStatusLineWhileModelAndToolWork(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      delay: 400ms
      replies:
        - text: "Checking. "
          tool_calls: [{name: bash, arguments: '{"command": "sleep 2; echo slept"}'}]
        - text: "All done."
agents:
  - id: main
    provider: scripted
    preset: workspace-write
    workspace: %s
`, dir)), 0o644)
	m := startTmux(t, "run", "--config", cfg, "--yolo")
	m.send("go")

	// The model takes 400ms per chunk: the status says it is thinking.
	s := m.waitFor("the thinking status", func(s string) bool { return strings.Contains(lastLine(s), "thinking ·") })
	if !statusLine.MatchString(lastLine(s)) {
		t.Fatalf("the last line is no status line:\n%s", s)
	}
	// The command sleeps 2s: the status names it and counts its time.
	first := m.waitFor("the running status", func(s string) bool { return strings.Contains(lastLine(s), "running bash sleep 2; echo slept") })
	later := m.waitFor("the command's time", func(s string) bool { return strings.Contains(lastLine(s), "(1.") })
	if lastLine(first) == lastLine(later) {
		t.Fatalf("the status line did not move:\n%s", later)
	}
	// A line typed meanwhile is shown once, above the status, and queued.
	m.send("and then this")
	m.waitForText("› and then this")
	m.waitForText("(queued)")

	// Both turns end: the screen ends with the prompt, no status anywhere.
	s = m.waitFor("the end of both turns", func(s string) bool {
		return strings.Count(s, "All done.") == 2 && lastLine(s) == ">"
	})
	if statusLine.MatchString(s) || strings.Contains(s, "Ctrl-C to cancel") {
		t.Fatalf("a status line was left on the screen:\n%s", s)
	}
	if !regexp.MustCompile(`(?m)^ *✓ · [0-9.]+s$`).MatchString(s) {
		t.Fatalf("no turn line after the answer:\n%s", s)
	}
	if strings.Contains(s, "[INFO]") {
		t.Fatalf("a log line reached the conversation:\n%s", s)
	}
	if strings.Count(s, "› and then this") != 1 {
		t.Fatalf("the typed line is not shown exactly once:\n%s", s)
	}
}

// TestRichRendersMarkdownDiffsAndUsage: the answer's Markdown is rendered
// (no markers left, bold in bold, code highlighted, the table drawn), an
// edit shows its diff in colour, a multi-line output shows its first lines
// and /expand shows all of it, and the turn ends with its tokens and cost.
func TestRichRendersMarkdownDiffsAndUsage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: bash, arguments: '{"command": "seq 1 12"}'}]
        - tool_calls: [{name: edit, arguments: '{"path": "a.txt", "old": "two", "new": "TWO"}'}]
          usage: {input_tokens: 1300, output_tokens: 20}
        - text: "## Result\n\nSome **bold** text and `+"`code`"+`.\n\n`+"```go\\nfunc main() {}\\n```"+`\n\n| name | size |\n|---|---|\n| a.txt | 3 |\n"
          usage: {input_tokens: 1400, output_tokens: 60}
agents:
  - id: main
    provider: scripted
    model: demo
    preset: workspace-write
    workspace: %s
pricing:
  models:
    demo: {input: 3, output: 15}
log:
  level: warn
`, dir)), 0o644)
	m := startTmux(t, "run", "--config", cfg, "--yolo")
	m.send("go")
	s := m.waitFor("the end of the turn", func(s string) bool { return strings.Contains(s, "✓") && lastLine(s) == ">" })

	// Markdown: rendered, not shown as source.
	for _, want := range []string{"Result", "Some bold text and", "func main() {}", "name", "a.txt", "│"} {
		if !strings.Contains(s, want) {
			t.Errorf("the answer lacks %q:\n%s", want, s)
		}
	}
	for _, raw := range []string{"**bold**", "```", "|---|"} {
		if strings.Contains(s, raw) {
			t.Errorf("the answer shows Markdown source %q:\n%s", raw, s)
		}
	}
	colour := m.screen(true)
	// Bold is bold: an SGR with attribute 1 just before the word.
	if !regexp.MustCompile(`\x1b\[[0-9;]*\b1m(\x1b\[[0-9;]*m)*bold`).MatchString(colour) {
		t.Errorf("bold is not bold:\n%q", colour)
	}
	// Code is highlighted: the keyword func has a colour of its own.
	if !regexp.MustCompile(`\x1b\[[0-9;]*m(\x1b\[[0-9;]*m)*func\x1b`).MatchString(colour) {
		t.Errorf("the code block is not highlighted:\n%q", colour)
	}
	// The diff: removed lines red, added lines green.
	if !regexp.MustCompile(`\x1b\[31m(\x1b\[[0-9;]*m)*-two`).MatchString(colour) || !regexp.MustCompile(`\x1b\[32m(\x1b\[[0-9;]*m)*\+TWO`).MatchString(colour) {
		t.Errorf("the edit's diff is not coloured:\n%q", colour)
	}
	// The tool's output: one dim line, its first lines, a way to see all.
	for _, want := range []string{"● bash seq 1 12", "⎿ 1", "… 9 more lines (/expand 1)"} {
		if !strings.Contains(s, want) {
			t.Errorf("the tool call lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "1 2 3 4") {
		t.Errorf("the tool's output was flattened:\n%s", s)
	}
	// The turn's line: time, tokens and the cost from pricing:.
	// 2,700 input tokens at $3/M and 80 output at $15/M: $0.0093.
	if !regexp.MustCompile(`✓ · [0-9.]+s · 2\.7k in · 80 out · \$0\.0093`).MatchString(s) {
		t.Errorf("no usage line with the cost:\n%s", s)
	}

	m.send("/expand 1")
	s = m.waitForText("exit code: 0")
	if !strings.Contains(s, "#1 bash seq 1 12") || !regexp.MustCompile(`(?m)^11$`).MatchString(s) {
		t.Errorf("/expand 1 does not show the whole output:\n%s", s)
	}
}

// TestRichQuestionShowsWhatIsTyped: while a question waits for an answer
// the status line steps aside and the terminal echoes the answer being
// typed; once answered, the status line comes back until the turn ends.
func TestRichQuestionShowsWhatIsTyped(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 1; echo hi"}'}]
        - text: "Finished."
agents:
  - id: main
    provider: scripted
    preset: workspace-write
    workspace: %s
log:
  level: warn
`, dir)), 0o644)
	m := startTmux(t, "run", "--config", cfg)
	m.send("go")
	s := m.waitFor("the question", func(s string) bool { return strings.HasSuffix(lastLine(s), "why) >") })
	if statusLine.MatchString(s) {
		t.Fatalf("a status line is drawn with the question:\n%s", s)
	}
	m.tmux("send-keys", "-t", "0", "-l", "y")
	// The question fills the width: the answer may start a row of its own.
	m.waitFor("the typed answer", func(s string) bool { return strings.HasSuffix(strings.Join(strings.Fields(s), " "), "why) > y") })
	m.tmux("send-keys", "-t", "0", "Enter")
	m.waitFor("the status line after the answer", func(s string) bool {
		return strings.Contains(s, "(allowed once)") && strings.Contains(lastLine(s), "running bash sleep 1; echo hi")
	})
	s = m.waitFor("the end of the turn", func(s string) bool { return strings.Contains(s, "Finished.") && lastLine(s) == ">" })
	if statusLine.MatchString(s) {
		t.Fatalf("a status line was left on the screen:\n%s", s)
	}
}
