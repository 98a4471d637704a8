package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

type planOut struct {
	Planning   bool   `json:"planning"`
	Plan       string `json:"plan"`
	PlanStatus string `json:"plan_status"`
	Todos      []struct {
		ID, Text, Status string
	} `json:"todos"`
}

// TestPlanModeThroughTheAPI: POST .../plan puts a session in plan mode,
// where the host refuses the model's write; the todo list and an edited
// plan are in GET .../plan, and both survive closing and resuming the
// session; a person's leave ends plan mode; a bad op says which are.
func TestPlanModeThroughTheAPI(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{
			{Name: "todo", Arguments: `{"todos": [{"id": "1", "text": "read", "status": "completed"}, {"id": "2", "text": "write", "status": "in_progress"}]}`},
			{Name: "write", Arguments: `{"path": "out.txt", "content": "x"}`},
		}},
		{Text: "planned"},
	}, extra: "  - use: tools.files\n  - use: tools.plan\n"})
	if r := e.call("POST", "/v1/sessions", map[string]any{"agent": "main", "plan_mode": true, "session_id": "plan-0"}); r.status != http.StatusCreated {
		t.Fatalf("open in plan mode: %d %s", r.status, r.body)
	}
	if r := e.call("GET", "/v1/sessions/plan-0/plan", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"planning":true`) {
		t.Fatalf("opened with plan_mode: %d %s", r.status, r.body)
	}
	id := e.open(map[string]any{"session_id": "plan-1"})
	plan := func(method string, body any) planOut {
		t.Helper()
		r := e.call(method, "/v1/sessions/"+id+"/plan", body)
		if r.status != http.StatusOK {
			t.Fatalf("%s plan %v: %d %s", method, body, r.status, r.body)
		}
		var out planOut
		r.json(t, &out)
		return out
	}
	if st := plan("GET", nil); st.Planning {
		t.Fatalf("a session starts outside plan mode: %+v", st)
	}
	if st := plan("POST", map[string]string{"op": "enter"}); !st.Planning {
		t.Fatalf("enter: %+v", st)
	}
	e.send(id, "r1", "plan it")
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	refused := false
	for _, ev := range evs {
		if ev.Type == "tool/result" && ev.Message != nil && strings.Contains(ev.Message.Content, "plan mode") && strings.Contains(ev.Message.Content, `"write"`) {
			refused = true
		}
	}
	if !refused {
		t.Fatalf("the write was not refused in plan mode: %+v", evs)
	}
	if st := plan("POST", map[string]string{"op": "edit", "plan": "# Mine\n\nwrite out.txt"}); st.PlanStatus != "edited" || st.Plan != "# Mine\n\nwrite out.txt" {
		t.Fatalf("edit: %+v", st)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/plan", map[string]string{"op": "exit"}); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "enter") {
		t.Fatalf("a bad op: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/resume", nil); r.status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	st := plan("GET", nil)
	if !st.Planning || st.Plan != "# Mine\n\nwrite out.txt" || len(st.Todos) != 2 || st.Todos[1].Status != "in_progress" {
		t.Fatalf("after resume: %+v", st)
	}
	if st := plan("POST", map[string]string{"op": "leave"}); st.Planning || len(st.Todos) != 2 {
		t.Fatalf("leave: %+v", st)
	}
}
