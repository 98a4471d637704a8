package serve_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/jobs"
)

// TestJobsAreListedAndKilledThroughTheAPI: a turn starts a background job
// (a real sleep, bash without a sandbox); GET …/jobs lists it running,
// POST …/jobs/{job}/kill ends it and answers with its end, and an id the
// agent has no job under is a 404 with JOB_NOT_FOUND.
func TestJobsAreListedAndKilledThroughTheAPI(t *testing.T) {
	e := newEnv(t, envOpts{
		extra: "  - use: tools.bash\n    config: {jobs: {enabled: true, wake: off}, sandbox: {mode: off}}\n" +
			"  - use: tools.permission\n    config: {mode: full-access}\n",
		replies: []scripted.Reply{
			{ToolCalls: []scripted.Call{{Name: "bash", Arguments: `{"command": "echo up; sleep 300", "background": true}`}}},
			{Text: "started"},
			{ToolCalls: []scripted.Call{{Name: "bash", Arguments: `{"command": "sleep 301", "background": true}`}}},
			{Text: "another"},
		},
	})
	id := e.open(map[string]any{"session_id": "jobs-1"})
	e.send(id, "r1", "start it")
	e.waitEvents(id, "turn end", turnsEnded(1))

	var list struct{ Jobs []jobs.Info }
	r := e.call("GET", "/v1/sessions/"+id+"/jobs", nil)
	r.json(t, &list)
	if r.status != http.StatusOK || len(list.Jobs) != 1 || list.Jobs[0].ID != "job-1" || !list.Jobs[0].Running ||
		list.Jobs[0].Pid == 0 || list.Jobs[0].Command != "echo up; sleep 300" {
		t.Fatalf("jobs: %d %s", r.status, r.body)
	}
	r = e.call("POST", "/v1/sessions/"+id+"/jobs/job-1/kill", nil)
	var ended jobs.Info
	r.json(t, &ended)
	if r.status != http.StatusOK || ended.Running || !strings.HasPrefix(ended.Status, "killed by the HTTP API") {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/jobs/job-7/kill", nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), string(jobs.NotFound)) {
		t.Fatalf("an unknown job: %d %s", r.status, r.body)
	}
	if r := e.call("GET", "/v1/sessions/nope/jobs", nil); r.status != http.StatusNotFound {
		t.Fatalf("an unknown session: %d %s", r.status, r.body)
	}

	// Closing the session kills the job it still runs.
	e.send(id, "r2", "one more")
	e.waitEvents(id, "second turn end", turnsEnded(2))
	r = e.call("GET", "/v1/sessions/"+id+"/jobs", nil)
	r.json(t, &list)
	if len(list.Jobs) != 2 || !list.Jobs[1].Running {
		t.Fatalf("jobs: %s", r.body)
	}
	pid := list.Jobs[1].Pid
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	// Its members are dsh's children, reaped at once: a short wait covers
	// the reaping of the group's watcher.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			t.Fatalf("the job's group %d outlived its session's close", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
