package execplugin_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions"
)

// eventsReference is the wire reference for plugin authors.
const eventsReference = "../../sdk/proto/pluginv1/EVENTS.md"

// TestEventsReferenceMatchesTheWire runs a session's turn with a tool call
// a person approves, and a refused prompt, through a plugin that records every event it hears, and holds each JSON example of
// the reference to what the host really sent: some recorded payload (or
// result) of that event must have the example's shape. It also fails when
// an event plugins can hear has no example.
func TestEventsReferenceMatchesTheWire(t *testing.T) {
	examples := readExamples(t)
	for name, kind := range execplugin.BridgedEvents() {
		parts := []string{"payload"}
		if kind == "waterfall" {
			parts = append(parts, "result")
		}
		for _, part := range parts {
			if _, ok := examples[name+" "+part]; !ok {
				t.Errorf("%s documents no %s of %s; add a ```json %s %s block", eventsReference, part, name, name, part)
			}
		}
	}

	recorded := recordATurn(t)
	for key, example := range examples {
		event, part, _ := strings.Cut(key, " ")
		want := shape(example)
		var seen []string
		for _, line := range recorded[event] {
			got := shape(line[part])
			if got == want {
				seen = nil
				break
			}
			seen = append(seen, got)
		}
		if len(recorded[event]) == 0 {
			t.Errorf("%s has an example of %s, which the host never sent in the test turn", eventsReference, event)
		} else if seen != nil {
			t.Errorf("the %s example of %s has the shape\n\t%s\nbut the host sent\n\t%s", part, event, want, strings.Join(seen, "\n\t"))
		}
	}
}

// readExamples returns the reference's JSON examples by "event part".
func readExamples(t *testing.T) map[string]any {
	t.Helper()
	doc, err := os.ReadFile(eventsReference)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, m := range regexp.MustCompile("(?s)```json (\\S+) (payload|result)\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		var v any
		if err := json.Unmarshal([]byte(m[3]), &v); err != nil {
			t.Fatalf("%s: the %s example of %s is not JSON: %v", eventsReference, m[2], m[1], err)
		}
		out[m[1]+" "+m[2]] = v
	}
	if len(out) == 0 {
		t.Fatalf("%s has no examples", eventsReference)
	}
	return out
}

// recordATurn runs one turn of a session through the recording plugin —
// a tool call a policy asks about and a person allows, an answer streamed
// chunk by chunk — then a prompt the rate limit refuses, and returns what
// the plugin heard, by event.
func recordATurn(t *testing.T) map[string][]map[string]any {
	bin, _ := binaries(t)
	file := filepath.Join(t.TempDir(), "recorded")
	t.Setenv("TESTPLUGIN_RECORD", file)
	// The recorder prepends its approval listener after tools.permission
	// prepended its own, so it is the outer policy and hears the ask.
	h, _ := startExec(t, fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: clock, arguments: '{"timezone": "UTC"}'}]
        - text: It is 00:51 UTC.
          usage: {input_tokens: 412, output_tokens: 18}
  - use: tools.clock
  - use: tools.permission
    config:
      rules: [{tool: clock, decision: ask, reason: reading the clock is watched}]
  - id: recorder
    exec: %s
    env_passthrough: [TESTPLUGIN_RECORD]
  - use: admission.rate-limit
    config: {per_minute: 1, burst: 1}
agents:
  - id: main
    provider: scripted
    model: demo
    system_prompt: You are a concise assistant.
`, bin))
	ctx := stdctx.Background()
	s, err := h.Sessions().Open(ctx, sessions.OpenOptions{Agent: "main", SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Detach(ctx)
	// The test answers approvals in the agent's own scope, as an answerer
	// plugin would: it takes the agent from the agents registry.
	reg, err := agents.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := reg.Get(s.AgentID())
	if !ok {
		t.Fatalf("no agent %s runs for session s1", s.AgentID())
	}
	svc, err := approval.Key.Get(a.Context())
	if err != nil {
		t.Fatal(err)
	}
	detach, err := svc.Attach(a.ID(), func(stdctx.Context, approval.Request) (approval.Answer, error) {
		return approval.Answer{Choice: approval.AllowOnce, Reason: "fine"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	user := agentcontroller.Source{Kind: agentcontroller.SourceUser, RPCID: "http", Entry: "serve",
		Principal: agentcontroller.Principal{Kind: "token", ID: "alice", Tenant: "acme"}}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "req-42", Content: "what time is it", Source: user}); err != nil {
		t.Fatal(err)
	}
	if err := h.Sessions().Idle(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "req-43", Content: "and now?", Source: user}); !errs.HasCode(err, sessions.PromptRejected) {
		t.Fatalf("the rate limit must refuse the second prompt: %v", err)
	}
	// Notifications arrive on their own schedule: wait for every event
	// name and for every event of the session log.
	evs, err := h.Sessions().History(ctx, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	logged := len(evs)
	deadline := time.Now().Add(10 * time.Second)
	for {
		recorded := map[string][]map[string]any{}
		raw, _ := os.ReadFile(file)
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil {
				name, _ := rec["event"].(string)
				recorded[name] = append(recorded[name], rec)
			}
		}
		missing := 0
		for name := range execplugin.BridgedEvents() {
			if len(recorded[name]) == 0 {
				missing++
			}
		}
		if missing == 0 && len(recorded["session/event"]) >= logged {
			return recorded
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bridged events never reached the recording plugin, and %d of %d session events did; heard: %v",
				missing, len(recorded["session/event"]), logged, slices.Sorted(maps.Keys(recorded)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shape describes a JSON value by its structure alone: object keys, the
// distinct shapes of array elements, and scalar types.
func shape(v any) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + shape(v[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		var elems []string
		for _, e := range v {
			if s := shape(e); !slices.Contains(elems, s) {
				elems = append(elems, s)
			}
		}
		sort.Strings(elems)
		return "[" + strings.Join(elems, "|") + "]"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
