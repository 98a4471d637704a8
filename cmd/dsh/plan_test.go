package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// planMCP is a real MCP server over streamable HTTP with a read-only tool
// (lookup) and one that is not (deploy); calls lists what ran.
func planMCP(t *testing.T) (url string, calls func() []string) {
	t.Helper()
	var mu sync.Mutex
	var ran []string
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "plan-test", Version: "1"}, nil)
	schema := map[string]any{"type": "object", "additionalProperties": false}
	for _, tool := range []struct {
		name     string
		readOnly bool
	}{{"lookup", true}, {"deploy", false}} {
		name := tool.name
		srv.AddTool(&mcpsdk.Tool{Name: name, Description: name, InputSchema: schema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: tool.readOnly}},
			func(stdctx.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				mu.Lock()
				ran = append(ran, name)
				mu.Unlock()
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: name + " done"}}}, nil
			})
	}
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ran...)
	}
}

// planConfig is a config whose agent runs in full access with the plan
// preset (so plan mode must hold against a policy that allows everything),
// its session in store, the model answering replies.
func planConfig(t *testing.T, workspace, store, mcpURL, replies string) string {
	t.Helper()
	cfg := `plugins:
  - use: llm.scripted
    config:
      replies:
` + replies + `  - use: tools.mcp
    config: {name: srv, url: ` + mcpURL + `}
  - use: session.jsonl
    config: {dir: ` + store + `}
agents:
  - id: main
    provider: scripted
    session: plan-session
    workspace: ` + workspace + `
    presets: [full-access, plan]
log:
  level: warn
`
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type planEvent struct {
	Type     string `json:"type"`
	ToolCall *struct {
		ID, Name, Arguments string
	} `json:"tool_call"`
	Message *struct {
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"message"`
	Plan *struct {
		Planning   bool   `json:"planning"`
		Plan       string `json:"plan"`
		PlanStatus string `json:"plan_status"`
		Change     string `json:"change"`
		By         string `json:"by"`
		Todos      []struct {
			ID, Text, Status string
		} `json:"todos"`
	} `json:"plan"`
}

func readPlanLog(t *testing.T, store string) []planEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(store, "plan-session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []planEvent
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e planEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, e)
	}
	return out
}

// toolResults maps each call's label to its result: the label is the one
// of labels whose text the call's name and arguments contain, exitN for
// the Nth exit_plan_mode and w2 for the second write of notes.md. Call ids
// repeat across steps, so calls are paired with results within a step.
func toolResults(evs []planEvent) map[string]string {
	labels := map[string]string{"w": `"notes.md"`, "sed": `sed -i`, "deploy": `srv__deploy`, "cat": `cat f.txt`, "lookup": `srv__lookup`,
		"todo": `"todos"`, "w3": `more.md`}
	byID := map[string]string{}
	out := map[string]string{}
	exits, writes := 0, 0
	for _, e := range evs {
		switch {
		case e.Type == "step/start":
			byID = map[string]string{}
		case e.Type == "tool/call" && e.ToolCall != nil:
			what := e.ToolCall.Name + " " + e.ToolCall.Arguments
			if e.ToolCall.Name == "exit_plan_mode" {
				exits++
				byID[e.ToolCall.ID] = fmt.Sprintf("exit%d", exits)
				continue
			}
			for label, text := range labels {
				if strings.Contains(what, text) {
					if label == "w" {
						if writes++; writes > 1 {
							label = "w2"
						}
					}
					byID[e.ToolCall.ID] = label
				}
			}
		case e.Type == "tool/result" && e.Message != nil:
			out[byID[e.Message.ToolCallID]] = e.Message.Content
		}
	}
	return out
}

func planChanges(evs []planEvent) []string {
	var out []string
	for _, e := range evs {
		if e.Type == "plan/updated" {
			out = append(out, fmt.Sprintf("%s:%v:%s", e.Plan.Change, e.Plan.Planning, e.Plan.By))
		}
	}
	return out
}

// TestPlanModeThroughDshRun: an agent in full access with the plan preset
// starts in plan mode. The host refuses a write, a sed -i through bash and
// a non-read-only MCP tool, and runs a read-only bash command, a
// read-only MCP tool and the todo tool. exit_plan_mode with nobody to ask
// keeps plan mode; the next run resumes the session still planning, and
// leaves only when the operator allows exit_plan_mode; a third run resumes
// outside plan mode, with the todo list.
func TestPlanModeThroughDshRun(t *testing.T) {
	ws, store := t.TempDir(), filepath.Join(t.TempDir(), "sessions")
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url, calls := planMCP(t)
	plan := `# Plan\n\n1. write notes.md`
	run1 := `        - tool_calls:
            - {name: write, arguments: '{"path": "notes.md", "content": "x"}'}
            - {name: bash, arguments: '{"command": "sed -i s/alpha/beta/ f.txt"}'}
            - {name: srv__deploy, arguments: '{}'}
            - {name: bash, arguments: '{"command": "cat f.txt | grep alpha"}'}
            - {name: srv__lookup, arguments: '{}'}
            - {name: todo, arguments: '{"todos": [{"id": "1", "text": "write notes", "status": "in_progress"}, {"id": "2", "text": "check", "status": "pending"}]}'}
        - tool_calls: [{name: exit_plan_mode, arguments: '{"plan": "` + plan + `"}'}]
        - text: waiting
`
	o := runDsh(t, "", "run", "--config", planConfig(t, ws, store, url, run1), "-p", "plan the notes")
	if o.code != 0 {
		t.Fatalf("run 1: exit %d: %s", o.code, o.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes.md")); !os.IsNotExist(err) {
		t.Fatalf("plan mode let write create notes.md (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f.txt")); string(b) != "alpha\n" {
		t.Fatalf("plan mode let sed -i change f.txt: %q", b)
	}
	if got := strings.Join(calls(), ","); got != "lookup" {
		t.Fatalf("MCP tools that ran: %q, want only the read-only lookup", got)
	}
	evs := readPlanLog(t, store)
	res := toolResults(evs)
	for _, id := range []string{"w", "sed", "deploy"} {
		if !strings.Contains(res[id], "plan mode") || !strings.Contains(res[id], "exit_plan_mode") || !strings.Contains(res[id], "did not run") {
			t.Errorf("the refusal of %s must tell the model it is planning and how to propose: %q", id, res[id])
		}
	}
	if !strings.Contains(res["sed"], "-i") {
		t.Errorf("the sed refusal should say what writes: %q", res["sed"])
	}
	if !strings.Contains(res["cat"], "alpha") || !strings.Contains(res["lookup"], "lookup done") {
		t.Errorf("read-only calls must run: cat %q, lookup %q", res["cat"], res["lookup"])
	}
	if !strings.Contains(res["exit1"], "not approved") || !strings.Contains(res["exit1"], "stays in plan mode") {
		t.Errorf("exit with nobody to ask must be refused and keep plan mode: %q", res["exit1"])
	}
	want := "entered:true:config,todos:true:model,proposed:true:model,rejected:true:person"
	if got := strings.Join(planChanges(evs), ","); got != want {
		t.Fatalf("plan changes %s, want %s", got, want)
	}

	// Run 2 resumes the session: still planning (from the log). The
	// operator allows exit_plan_mode, so the plan is approved and the
	// write after it runs.
	run2 := `        - tool_calls: [{name: exit_plan_mode, arguments: '{"plan": "` + plan + `"}'}]
        - tool_calls: [{name: write, arguments: '{"path": "notes.md", "content": "x"}'}]
        - text: done
`
	cfg2 := planConfig(t, ws, store, url, run2)
	// Before the approval, a write is refused: the resumed session plans.
	o = runDsh(t, "", "run", "--config", cfg2, "--allow", "exit_plan_mode", "-p", "go")
	if o.code != 0 {
		t.Fatalf("run 2: exit %d: %s", o.code, o.stderr)
	}
	evs = readPlanLog(t, store)
	res = toolResults(evs)
	if !strings.Contains(res["exit2"], "approved") {
		t.Fatalf("exit allowed by the operator: %q", res["exit2"])
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes.md")); err != nil || string(b) != "x" {
		t.Fatalf("after approval the write must run: %q %v (%q)", b, err, res["w2"])
	}
	changes := planChanges(evs)
	if got := strings.Join(changes[4:], ","); got != "proposed:true:model,approved:false:person" {
		t.Fatalf("run 2 plan changes %s", got)
	}
	last := evs[len(evs)-1]
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == "plan/updated" {
			last = evs[i]
			break
		}
	}
	if len(last.Plan.Todos) != 2 || last.Plan.Todos[0].Text != "write notes" || last.Plan.PlanStatus != "approved" || !strings.Contains(last.Plan.Plan, "# Plan") {
		t.Fatalf("the state after approval keeps the plan and the todos: %+v", last.Plan)
	}

	// Run 3 resumes outside plan mode, though the preset starts new
	// sessions planning: a write runs at once.
	run3 := `        - tool_calls: [{name: write, arguments: '{"path": "more.md", "content": "y"}'}]
        - text: done
`
	o = runDsh(t, "", "run", "--config", planConfig(t, ws, store, url, run3), "-p", "more")
	if o.code != 0 {
		t.Fatalf("run 3: exit %d: %s", o.code, o.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "more.md")); err != nil {
		t.Fatalf("a resumed session out of plan mode must write: %v (%q)", err, toolResults(readPlanLog(t, store))["w3"])
	}
}

// TestPlanCommandsInTheCLI: /plan enters plan mode, the agent's todo list
// shows live and under /todos, a write is refused while planning,
// /plan edit replaces the plan from a file, and the person's
// approval of exit_plan_mode at the terminal ends plan mode.
func TestPlanCommandsInTheCLI(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "edited.md"), []byte("# Edited plan\n\nwrite out.txt\n"), 0o644)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls:
            - {name: todo, arguments: '{"todos": [{"id": "1", "text": "look around", "status": "completed"}, {"id": "2", "text": "write out.txt", "status": "pending"}]}'}
            - {name: write, arguments: '{"path": "out.txt", "content": "x"}'}
        - text: planned
        - tool_calls: [{name: exit_plan_mode, arguments: '{"plan": "# Plan\n\nwrite out.txt"}'}]
        - text: approved
agents:
  - id: main
    provider: scripted
    workspace: `+ws+`
    presets: [workspace-write]
presets:
  workspace-write:
    - use: tools.files
    - use: tools.plan
log:
  level: warn
`), 0o644)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "/plan\r")
	pos = scr.waitFor(t, pos, "plan mode: on")
	io.WriteString(tty, "look first\r")
	pos = scr.waitFor(t, pos, "[x] look around")
	pos = scr.waitFor(t, pos, "planned")
	pos = scr.waitFor(t, pos, "> ")
	if _, err := os.Stat(filepath.Join(ws, "out.txt")); !os.IsNotExist(err) {
		t.Fatalf("plan mode let the write run: %v", err)
	}
	io.WriteString(tty, "/todos\r")
	pos = scr.waitFor(t, pos, "[ ] write out.txt  (2)")
	pos = scr.waitFor(t, pos, "1 of 2 done")
	io.WriteString(tty, "/plan edit edited.md\r")
	pos = scr.waitFor(t, pos, "# Edited plan")
	io.WriteString(tty, "propose it\r")
	pos = scr.waitFor(t, pos, "leave plan mode and carry out this plan?")
	io.WriteString(tty, "y\r")
	pos = scr.waitFor(t, pos, "plan approved")
	pos = scr.waitFor(t, pos, "approved")
	pos = scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "/plan show\r")
	scr.waitFor(t, pos, "plan mode: off")
	leaveWithCtrlD(t, tty, cmd, scr)
}
