package serve_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
)

const fastGoals = "goals:\n  min_backoff: 5ms\n  max_backoff: 20ms\n"

// waitGoal polls GET .../goal until the goal is in state want.
func (e *env) waitGoal(id string, want session.GoalState) session.Goal {
	e.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		r := e.call("GET", "/v1/sessions/"+id+"/goal", nil)
		var g session.Goal
		if r.status == http.StatusOK {
			r.json(e.t, &g)
			if g.State == want {
				return g
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the goal never became %s: %d %s", want, r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A goal set through the API runs continuations from the caller until the
// model reports it complete.
func TestAGoalSetThroughTheAPICompletes(t *testing.T) {
	e := newEnv(t, envOpts{top: fastGoals, replies: []scripted.Reply{
		{Text: "looking around"},
		{ToolCalls: []scripted.Call{{Name: "goal_status", Arguments: `{"status":"complete","reason":"all done"}`}}},
		{Text: "finished"},
	}})
	id := e.open(map[string]any{"agent": "main"})
	r := e.call("POST", "/v1/sessions/"+id+"/goal", map[string]any{"objective": "tidy the repository", "budget": map[string]any{"turns": 5, "time": "10m"}})
	if r.status != http.StatusOK {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	var g session.Goal
	r.json(t, &g)
	if g.State != session.GoalActive || g.Budget.Turns != 5 || time.Duration(g.Budget.Time) != 10*time.Minute || g.By != "token:default" {
		t.Fatalf("set: %+v", g)
	}
	g = e.waitGoal(id, session.GoalComplete)
	if g.Reason != "all done" || g.By != "model" || g.CheckIns != 2 {
		t.Fatalf("complete: %+v", g)
	}
	if g.SetBy == nil || g.SetBy.Principal == nil || g.SetBy.Principal.ID != "default" {
		t.Fatalf("set_by: %+v", g.SetBy)
	}
	evs := e.waitEvents(id, "the goal's last turn", func(evs []eventOut) bool {
		n := 0
		for _, ev := range evs {
			if ev.Type == "turn/end" {
				n++
			}
		}
		return n == 2
	})
	// The turn that completed the goal counts once it ended.
	if r := e.call("GET", "/v1/sessions/"+id+"/goal", nil); !strings.Contains(string(r.body), `"turns":2`) {
		t.Fatalf("spent after the last turn: %s", r.body)
	}
	var goals, prompts int
	for _, ev := range evs {
		switch {
		case ev.Type == string(session.GoalRecorded):
			goals++
		case ev.Type == "user/message" && strings.HasPrefix(ev.RequestID, g.ID+"-"):
			prompts++
			if !strings.Contains(ev.Message.Content, "tidy the repository") {
				t.Fatalf("a continuation without the objective: %q", ev.Message.Content)
			}
		}
	}
	if goals != 2 || prompts != 2 {
		t.Fatalf("%d goal records and %d continuations in the log", goals, prompts)
	}
}

// policy.cel refusing entry "goal" blocks the goal with the rule's word.
func TestAGoalRefusedByPolicyIsBlocked(t *testing.T) {
	e := newEnv(t, envOpts{top: fastGoals, extra: `  - use: policy.cel
    config:
      admission:
        - name: no-goals
          when: source.entry == "goal"
          action: refuse
          message: goals are not allowed here
`})
	id := e.open(map[string]any{"agent": "main"})
	if r := e.call("POST", "/v1/sessions/"+id+"/goal", map[string]any{"objective": "do it"}); r.status != http.StatusOK {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	g := e.waitGoal(id, session.GoalBlocked)
	if g.By != "admission" || !strings.Contains(g.Reason, "goals are not allowed here") || g.CheckIns != 1 {
		t.Fatalf("blocked: %+v", g)
	}
	// A person's prompt still passes.
	e.send(id, "p1", "hello")
}

func TestGoalRoutesRefuseWhatTheGoalCannotDo(t *testing.T) {
	e := newEnv(t, envOpts{top: "goals:\n  min_backoff: 1h\n  max_backoff: 1h\n"})
	id := e.open(map[string]any{"agent": "main"})
	base := "/v1/sessions/" + id + "/goal"
	if r := e.call("GET", base, nil); r.status != http.StatusNotFound || r.err(t).Code != "SESSION_NO_GOAL" {
		t.Fatalf("show without a goal: %d %s", r.status, r.body)
	}
	for _, body := range []any{nil, map[string]any{"objective": " "}, map[string]any{"objective": "x", "budget": map[string]any{"turns": -2}},
		map[string]any{"objective": "x", "budget": map[string]any{"time": "soon"}}, map[string]any{"goal": "x"}} {
		if r := e.call("POST", base, body); r.status != http.StatusBadRequest {
			t.Fatalf("set %v: %d %s", body, r.status, r.body)
		}
	}
	if r := e.call("POST", base+"/pause", nil); r.status != http.StatusNotFound {
		t.Fatalf("pause without a goal: %d %s", r.status, r.body)
	}
	if r := e.call("POST", base, map[string]any{"objective": "keep going"}); r.status != http.StatusOK {
		t.Fatalf("set: %d %s", r.status, r.body)
	}
	var g session.Goal
	r := e.call("POST", base+"/pause", nil)
	r.json(t, &g)
	if r.status != http.StatusOK || g.State != session.GoalPaused || !strings.Contains(g.Reason, "token:default") {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if r := e.call("POST", base+"/pause", nil); r.status != http.StatusConflict || r.err(t).Code != "SESSION_GOAL_CONFLICT" {
		t.Fatalf("pause twice: %d %s", r.status, r.body)
	}
	if r := e.call("POST", base+"/resume", map[string]any{"objective": "other"}); r.status != http.StatusBadRequest {
		t.Fatalf("resume with an objective: %d %s", r.status, r.body)
	}
	if r := e.call("POST", base+"/resume", nil); r.status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if r := e.call("DELETE", base, nil); r.status != http.StatusOK {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
	e.waitGoal(id, session.GoalCleared)
	if r := e.call("GET", "/v1/sessions/nope/goal", nil); r.status != http.StatusNotFound {
		t.Fatalf("an unknown session: %d %s", r.status, r.body)
	}
}
