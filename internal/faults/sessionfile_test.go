package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/services/session"
)

// logEvent is what the suite reads of a session.jsonl line.
type logEvent struct {
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
	Turn    int    `json:"turn"`
	Reason  string `json:"reason"`
	Message *struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		IsError    bool   `json:"is_error"`
	} `json:"message"`
	ToolCall *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"tool_call"`
}

// turn is one turn of a session file as the suite checks it.
type turn struct {
	prompts []string
	end     string // the turn/end reason; "" when the turn never ended
	calls   map[string]bool
	results map[string]bool
}

// readSession reads dir/id.jsonl and checks what every session file must
// hold whatever happened to the process that wrote it: contiguous sequence
// numbers, every turn closed, every tool call answered, the decision
// records' chain whole. It returns the turns.
func readSession(t *testing.T, dir, id string) []turn {
	t.Helper()
	path := filepath.Join(dir, id+".jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var turns []turn
	var events []session.Event
	var want int64 = 1
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for line := 1; sc.Scan(); line++ {
		var e logEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s:%d: not an event: %v\n%s", path, line, err, sc.Bytes())
		}
		if e.Seq != want {
			t.Fatalf("%s:%d: seq %d where %d was expected", path, line, e.Seq, want)
		}
		want++
		var ev session.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s:%d: not a session event: %v", path, line, err)
		}
		events = append(events, ev)
		if e.Type == string(session.DecisionRecorded) {
			continue // a record may come before the turn it admits
		}
		if e.Type == "turn/start" {
			turns = append(turns, turn{calls: map[string]bool{}, results: map[string]bool{}})
			continue
		}
		if len(turns) == 0 {
			t.Fatalf("%s:%d: %s before any turn", path, line, e.Type)
		}
		cur := &turns[len(turns)-1]
		switch e.Type {
		case "user/message":
			cur.prompts = append(cur.prompts, e.Message.Content)
		case "tool/call":
			cur.calls[e.ToolCall.ID] = true
		case "tool/result":
			cur.results[e.Message.ToolCallID] = true
		case "turn/end":
			cur.end = e.Reason
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := session.VerifyDecisions(id, events, nil); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for i, tr := range turns {
		if tr.end == "" {
			t.Fatalf("%s: turn %d never ended: %s", path, i+1, describe(turns))
		}
		for id := range tr.calls {
			if !tr.results[id] {
				t.Fatalf("%s: turn %d: tool call %s has no result", path, i+1, id)
			}
		}
	}
	return turns
}

func describe(turns []turn) string {
	s := ""
	for i, tr := range turns {
		s += fmt.Sprintf("\n  turn %d %q end=%q calls=%d", i+1, tr.prompts, tr.end, len(tr.calls))
	}
	return s
}

// promptCount counts how often each prompt was recorded.
func promptCount(turns []turn) map[string]int {
	n := map[string]int{}
	for _, tr := range turns {
		for _, p := range tr.prompts {
			n[p]++
		}
	}
	return n
}
