package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWhatAStreamSawOutlivesAKill: a client follows a session over SSE
// while its turn runs three tool steps and then streams an answer, and
// dsh serve is SIGKILLed mid-answer. Every event the stream sent as durable
// is in the log after the restart, under the same seq and type; a client
// reconnecting with its Last-Event-ID to the resumed session gets what
// came after — the interrupted turn's close — and nothing it had twice.
func TestWhatAStreamSawOutlivesAKill(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	storeYAML := "  - use: tools.clock\n  - use: session.jsonl\n    config: {dir: " + store + "}\n"
	cfg := crashServeConfigWith(t, storeYAML, state, "")
	// Three clock steps before the slow answer.
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.Replace(string(b), "      replies:\n", "      replies:\n"+strings.Repeat("        - tool_calls: [{name: clock, arguments: '{}'}]\n", 3), 1)
	if err := os.WriteFile(cfg, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions", `{"session_id":"w1"}`); code != http.StatusCreated {
		t.Fatalf("open: %d %s", code, out)
	}
	resp, err := http.Get(p.base + "/v1/sessions/w1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/w1/messages", `{"request_id":"m1","content":"look at the clock"}`); code != http.StatusAccepted {
		t.Fatalf("m1: %d %s", code, out)
	}
	type seen struct {
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
	}
	var got []seen
	lastID := ""
	ended := func(got []seen) int {
		n := 0
		for _, e := range got {
			if e.Type == "step/end" {
				n++
			}
		}
		return n
	}
	stop := time.AfterFunc(30*time.Second, func() { resp.Body.Close() })
	defer stop.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			lastID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: ") && event == "event":
			var u struct {
				Event seen `json:"event"`
			}
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &u)
			got = append(got, u.Event)
		}
		// The answer's step is stored with the turn's end: its chunks
		// after three ended steps are the answer streaming.
		if event == "chunk" && ended(got) == 3 {
			break
		}
	}
	p.kill()
	if steps := ended(got); steps != 3 {
		t.Fatalf("the stream saw %d steps end before the kill, want 3: %v", steps, got)
	}

	logged := map[int64]string{}
	for _, l := range crashLogSeq(t, filepath.Join(store, "w1.jsonl")) {
		logged[l.Seq] = l.Type
	}
	for _, e := range got {
		if logged[e.Seq] != e.Type {
			t.Fatalf("the stream sent seq %d (%s) as durable; the log holds %q there after the kill", e.Seq, e.Type, logged[e.Seq])
		}
	}

	p = startServe(t, cfg)
	if code, out := apiCall(t, p.base, "POST", "/v1/sessions/w1/resume", ``); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, out)
	}
	req, _ := http.NewRequest("GET", p.base+"/v1/sessions/w1/stream", nil)
	req.Header.Set("Last-Event-ID", lastID)
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Body.Close()
	sc = bufio.NewScanner(again.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	last := got[len(got)-1].Seq
	deadline := time.AfterFunc(20*time.Second, func() { again.Body.Close() })
	defer deadline.Stop()
	event = ""
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "event: ") {
			event = strings.TrimPrefix(line, "event: ")
			continue
		}
		if !strings.HasPrefix(line, "data: ") || event != "event" {
			continue
		}
		var u struct {
			Event struct {
				Seq    int64  `json:"seq"`
				Type   string `json:"type"`
				Reason string `json:"reason"`
			} `json:"event"`
		}
		json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &u)
		if u.Event.Seq <= last {
			t.Fatalf("the reconnected stream sent seq %d again (it had %d)", u.Event.Seq, last)
		}
		if u.Event.Type == "turn/end" {
			if u.Event.Reason != "interrupted" {
				t.Fatalf("the killed turn ended %q", u.Event.Reason)
			}
			p.kill()
			return
		}
	}
	t.Fatalf("the reconnected stream never closed the killed turn\n%s", p.log.String())
}

// crashLogSeq reads a log's seqs and types.
func crashLogSeq(t *testing.T, path string) []struct {
	Seq  int64
	Type string
} {
	t.Helper()
	var out []struct {
		Seq  int64
		Type string
	}
	for _, m := range readJSONL(t, path) {
		seq, _ := m["seq"].(float64)
		typ, _ := m["type"].(string)
		out = append(out, struct {
			Seq  int64
			Type string
		}{int64(seq), typ})
	}
	return out
}
