package serve_test

import (
	"net/http"
	"strings"
	"testing"

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
}
