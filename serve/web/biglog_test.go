package web_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A session log written straight into session.jsonl's directory, in the
// format the plugin writes (one event per line, the first with its agent),
// so a test can hold hundreds of sessions and thousands of messages without
// running them.

type logWriter struct {
	t     testing.TB
	w     *bufio.Writer
	f     *os.File
	seq   int64
	agent string
	at    time.Time
}

func newLog(t testing.TB, dir, id string, at time.Time) *logWriter {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return &logWriter{t: t, w: bufio.NewWriterSize(f, 1<<16), f: f, agent: "main@" + id, at: at}
}

func (l *logWriter) event(ev map[string]any) int64 {
	l.seq++
	l.at = l.at.Add(time.Second)
	ev["seq"] = l.seq
	ev["time"] = l.at.Format(time.RFC3339Nano)
	if l.seq == 1 {
		ev["agent"] = l.agent
	}
	b, err := json.Marshal(ev)
	if err != nil {
		l.t.Fatal(err)
	}
	l.w.Write(append(b, '\n'))
	return l.seq
}

// turn writes one turn: the prompt and the answer, with a bash call and
// its result when withTool; it returns the seq of the last answer.
func (l *logWriter) turn(n int, prompt, answer string, withTool bool) int64 {
	usage := map[string]any{"input_tokens": 1200 + n, "output_tokens": 80, "cache_hit_tokens": 1000, "cache_miss_tokens": 200 + n}
	l.event(map[string]any{"type": "turn/start", "turn": n})
	l.event(map[string]any{"type": "user/message", "turn": n, "message": map[string]any{"role": "user", "content": prompt}})
	step := 1
	if withTool {
		l.event(map[string]any{"type": "step/start", "turn": n, "step": step})
		call := map[string]any{"id": fmt.Sprintf("call_%d", n), "name": "bash", "arguments": `{"command":"go test ./..."}`}
		l.event(map[string]any{"type": "assistant/message", "turn": n, "step": step, "usage": usage, "provider": "scripted", "model": "scripted-1", "finish": "tool-calls",
			"message": map[string]any{"role": "assistant", "content": "Running the tests.", "tool_calls": []any{call}}})
		l.event(map[string]any{"type": "tool/call", "turn": n, "step": step, "tool_call": call})
		l.event(map[string]any{"type": "tool/result", "turn": n, "step": step, "message": map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "ok  \texample.com/app\t0.21s\nok  \texample.com/app/util\t0.05s"}})
		l.event(map[string]any{"type": "step/end", "turn": n, "step": step})
		step++
	}
	l.event(map[string]any{"type": "step/start", "turn": n, "step": step})
	last := l.event(map[string]any{"type": "assistant/message", "turn": n, "step": step, "usage": usage, "provider": "scripted", "model": "scripted-1", "finish": "stop",
		"message": map[string]any{"role": "assistant", "content": answer}})
	l.event(map[string]any{"type": "step/end", "turn": n, "step": step})
	l.event(map[string]any{"type": "turn/end", "turn": n, "reason": "completed"})
	return last
}

func (l *logWriter) close() {
	if err := l.w.Flush(); err != nil {
		l.t.Fatal(err)
	}
	if err := l.f.Close(); err != nil {
		l.t.Fatal(err)
	}
}

// bigAnswer is a Markdown answer of the kind a coding agent writes.
func bigAnswer(n int) string {
	return fmt.Sprintf("## Step %d\n\nThe change touches **two files**; the tests pass.\n\n```go\nfunc add(a, b int) int {\n\treturn a + b // %d\n}\n```\n\n| file | status |\n|---|---|\n| add.go | changed |\n| add_test.go | new |\n", n, n)
}

// seedSessions writes sessions small sessions spread over the last two
// months, and one session big of turns turns (two messages each); it
// returns the seq of the big session's last answer.
func seedSessions(t testing.TB, dir string, sessions, turns int, big string) int64 {
	t.Helper()
	now := time.Now()
	for i := range sessions {
		l := newLog(t, dir, fmt.Sprintf("s-%04d", i), now.Add(-time.Duration(i)*3*time.Hour))
		l.turn(1, fmt.Sprintf("task %d: tidy the imports of package p%d", i, i), "Done.", false)
		l.close()
	}
	l := newLog(t, dir, big, now.Add(-time.Duration(turns)*10*time.Second))
	var last int64
	for n := 1; n <= turns; n++ {
		last = l.turn(n, fmt.Sprintf("step %d: add the next function", n), bigAnswer(n), n%50 == 0)
	}
	l.close()
	return last
}
