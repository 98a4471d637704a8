package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// The rich terminal must change nothing for scripts and plain terminals:
// piped output, --json and an interactive session under NO_COLOR or
// TERM=dumb are compared byte for byte with what dsh printed before it
// existed. The golden files were written by the dsh of commit 4870ab4
// (the last one without rich mode):
//
//	git archive 4870ab4 | tar -x -C /tmp/old && (cd /tmp/old/cmd/dsh && go build -o /tmp/dsh-old .)
//	go test ./cmd/dsh -run TestPlainOutputIsUnchanged -args -plain.golden.bin=/tmp/dsh-old
var plainGoldenBin = flag.String("plain.golden.bin", "", "write testdata/plain/*.golden with this dsh binary instead of comparing")

// plainScenario is one turn that touches every kind of output: Markdown
// text, a tool with multi-line output, an edit with its diff, usage.
const plainScenario = `plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "Let me **look** first.\n"
          tool_calls: [{name: bash, arguments: '{"command": "seq 1 12"}'}]
        - tool_calls: [{name: edit, arguments: '{"path": "a.txt", "old": "two", "new": "TWO"}'}]
          usage: {input_tokens: 1300, output_tokens: 20}
        - text: "## Result\n\nSome **bold** text and ` + "`code`" + `.\n\n` + "```go\\nfunc main() {}\\n```" + `\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
          usage: {input_tokens: 1400, output_tokens: 60}
agents:
  - id: main
    provider: scripted
    preset: workspace-write
    workspace: %s
log:
  level: warn
`

// plainConfig writes the scenario's config and its workspace.
func plainConfig(t *testing.T) string {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(plainScenario, ws)), 0o644)
	return cfg
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`"time":"[^"]*"`)
	userRE = regexp.MustCompile(`"principal":\{"kind":"user","id":"[^"]*"`)
)

// masked replaces what differs from run to run: ids and timestamps, and
// from machine to machine: the OS user a prompt comes from.
func masked(s string) string {
	s = userRE.ReplaceAllString(s, `"principal":{"kind":"user","id":"USER"`)
	return timeRE.ReplaceAllString(uuidRE.ReplaceAllString(s, "UUID"), `"time":"T"`)
}

// golden compares got with testdata/plain/name.golden, or writes it when
// -plain.golden.bin is given. Decision records' digests, which cover
// times and ids, are masked too.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = digestRE.ReplaceAllString(got, "sha256:D")
	path := filepath.Join("testdata", "plain", name+".golden")
	if *plainGoldenBin != "" {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from what dsh printed before rich mode\n got: %q\nwant: %q", name, got, want)
	}
}

// digestRE matches a decision record's digests.
var digestRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

func plainBin() string {
	if *plainGoldenBin != "" {
		return *plainGoldenBin
	}
	return dshBin
}

func TestPlainOutputIsUnchanged(t *testing.T) {
	t.Run("piped", func(t *testing.T) {
		for _, mode := range []struct{ name, flag string }{{"text", ""}, {"json", "--json"}} {
			args := []string{"run", "--config", plainConfig(t), "-p", "go", "--yolo"}
			if mode.flag != "" {
				args = append(args, mode.flag)
			}
			cmd := exec.Command(plainBin(), args...)
			// A colour terminal in the environment changes nothing when
			// the output is a pipe.
			cmd.Env = append(os.Environ(), "DSH_CONFIG=", "TERM=xterm-256color", "NO_COLOR=", "COLORTERM=truecolor")
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %s", err, errb.String())
			}
			golden(t, "piped-"+mode.name+".stdout", masked(out.String()))
			golden(t, "piped-"+mode.name+".stderr", masked(errb.String()))
		}
	})
	for _, env := range []struct{ name, v string }{{"no-color", "NO_COLOR=1"}, {"dumb", "TERM=dumb"}} {
		t.Run("interactive "+env.name, func(t *testing.T) {
			cmd := exec.Command(plainBin(), "run", "--config", plainConfig(t), "--yolo")
			cmd.Env = append(os.Environ(), "DSH_CONFIG=", "TERM=xterm-256color", "NO_COLOR=", env.v)
			got := transcript(t, cmd, "| 1 | 2 |")
			// Both ask for the same plain session.
			golden(t, "interactive", masked(got))
		})
	}
}

// transcript runs cmd on a terminal 100 columns wide, sends "go", waits
// for last and the prompt after it, leaves with Ctrl-D and returns every
// byte the terminal received.
func transcript(t *testing.T, cmd *exec.Cmd, last string) string {
	t.Helper()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{}
	copied := make(chan struct{})
	go func() { io.Copy(scr, tty); close(copied) }()
	pos := scr.waitFor(t, 0, "> ")
	io.WriteString(tty, "go\r")
	pos = scr.waitFor(t, pos, last)
	scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, scr.String())
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("did not exit on Ctrl-D:\n%s", scr.String())
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	return scr.String()
}
