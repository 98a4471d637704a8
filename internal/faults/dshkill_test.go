package faults

import (
	stdctx "context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sessionYAML is the part of every dsh config here that persists agent
// main's conversation in sessions/s1.jsonl.
const sessionYAML = `  - use: session.jsonl
    config: {dir: sessions}
agents:
  - id: main
    provider: scripted
    session: s1
log: {level: warn}
`

// streamYAML streams a long answer slowly: a kill after the first word
// lands mid-stream.
const streamYAML = `plugins:
  - use: llm.scripted
    config:
      delay: 20ms
      replies:
        - text: "` + "%s" + `"
` + sessionYAML

// echoYAML answers at once by echoing the prompt.
const echoYAML = `plugins:
  - use: llm.scripted
` + sessionYAML

// toolYAML asks for the clock tool, whose call the fault plugin holds
// until it is cancelled, creating the marker file first.
const toolYAML = `plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "let me look. "
          tool_calls: [{name: clock, arguments: '{}'}]
        - text: "done"
  - use: tools.clock
  - id: holder
    exec: %s
    args: ["--hold-tool=clock", "--marker=%s"]
` + sessionYAML

func longAnswer() string {
	words := make([]string, 200)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	return strings.Join(words, " ")
}

// TestDshKilledMidTurnThenResumed kills `dsh run` with SIGKILL in the middle
// of a streamed answer and in the middle of a tool call, and resumes the
// session each time: the turns that completed are intact, the interrupted
// turn is closed as interrupted with its prompt kept, and every tool call
// has a result, so the history is valid for any provider.
func TestDshKilledMidTurnThenResumed(t *testing.T) {
	b := binaries(t)
	for _, kind := range []string{"mid-stream", "mid-tool"} {
		t.Run(kind, func(t *testing.T) {
			work := t.TempDir()
			o := &outcome{fault: "dsh SIGKILL " + kind + ", then resume"}
			defer record(o)
			marker := filepath.Join(work, "tool-started")
			kill := writeFile(t, work, "stream.yaml", fmt.Sprintf(streamYAML, longAnswer()))
			if kind == "mid-tool" {
				kill = writeFile(t, work, "tool.yaml", fmt.Sprintf(toolYAML, b.faultplugin, marker))
			}
			resume := writeFile(t, work, "echo.yaml", echoYAML)
			tries := 3 * scale()
			for i := range tries {
				o.tries++
				killed, after := fmt.Sprintf("killed-%d", i), fmt.Sprintf("after-%d", i)
				r := startDsh(t, b, work, kill, "", "-p", killed)
				if kind == "mid-stream" {
					r.waitFor(t, "the first streamed word", r.stdout.first)
				} else {
					ctx, cancel := stdctx.WithCancel(stdctx.Background())
					r.waitFor(t, "the held tool call", fileAppears(ctx, marker))
					cancel()
				}
				killedAt := time.Now()
				r.killGroup()
				r.wait(t)

				res := startDsh(t, b, work, resume, "", "-p", after)
				if code := res.wait(t); code != 0 {
					t.Fatalf("resume after kill %d: exit %d\nstderr: %s", i, code, res.stderr)
				}
				o.recover = append(o.recover, time.Since(killedAt))
				removeMarker(t, marker)

				turns := readSession(t, filepath.Join(work, "sessions"), "s1")
				counts := promptCount(turns)
				switch n := counts[killed]; {
				case n == 0:
					o.lost++
				case n > 1:
					o.doubled++
				default:
					o.kept++
				}
				for j := 0; j <= i; j++ {
					k, a := fmt.Sprintf("killed-%d", j), fmt.Sprintf("after-%d", j)
					if counts[k] != 1 || counts[a] != 1 {
						t.Fatalf("try %d: prompt %q recorded %d times, %q %d times (want 1 each):%s", i, k, counts[k], a, counts[a], describe(turns))
					}
					if got := endOf(turns, k); got != "interrupted" {
						t.Fatalf("try %d: the killed turn %q ended %q, want interrupted:%s", i, k, got, describe(turns))
					}
					if got := endOf(turns, a); got != "completed" {
						t.Fatalf("try %d: the completed turn %q reads %q after later kills:%s", i, a, got, describe(turns))
					}
				}
			}
		})
	}
}

// endOf is the end reason of the turn that recorded prompt.
func endOf(turns []turn, prompt string) string {
	for _, tr := range turns {
		for _, p := range tr.prompts {
			if p == prompt {
				return tr.end
			}
		}
	}
	return ""
}
