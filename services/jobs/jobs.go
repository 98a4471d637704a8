// Package jobs is the seam between the background jobs an agent starts
// (bash with background: true, in plugins/tools/bash) and the entry points
// that show them: the CLI's /jobs, the HTTP API's jobs route.
//
// Jobs belong to the plugin instance that started them, which kills them
// when the agent's session closes or dsh exits. Entry points hold session
// ids, never agents or plugins, so they cannot ask the plugin directly;
// each plugin instance adds itself to its tree's Table instead, and an
// entry point lists an agent's jobs there by the agent id its session
// reports (sessions.Info.AgentID). The Table is per tree, not per process:
// two hosts in one process (tests, a cluster's members) never see each
// other's jobs.
package jobs

import (
	"slices"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// NotFound is the code of a job id the agent has no job under.
const NotFound errs.Code = "JOB_NOT_FOUND"

// Info describes one job: what /jobs prints and the API returns.
type Info struct {
	// ID names the job within its agent ("job-1").
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	Command string `json:"command"`
	// Pid is the job's process id, which is also its process group's.
	Pid     int       `json:"pid,omitempty"`
	Started time.Time `json:"started"`
	Running bool      `json:"running"`
	// Ended is when it ended; Status says how ("exit code: 0", "killed
	// by job_kill", ...), or "running".
	Ended  time.Time `json:"ended,omitzero"`
	Status string    `json:"status"`
	// ExitCode is the code it exited with, when it exited by itself.
	ExitCode *int `json:"exit_code,omitempty"`
	// OutputBytes counts everything it wrote; Unread what the model has
	// not read yet; Dropped what the bounded buffer lost before it was
	// read.
	OutputBytes int64 `json:"output_bytes"`
	Unread      int64 `json:"unread_bytes"`
	Dropped     int64 `json:"dropped_bytes"`
}

// Source is one plugin instance's jobs.
type Source interface {
	// Jobs lists agentID's jobs, running and recently ended, oldest first.
	Jobs(agentID string) []Info
	// Kill ends agentID's job id and its whole process group, and waits
	// until it is gone; found is false when agentID has no such job here.
	Kill(agentID, id, by string) (found bool)
}

// Table is a tree's job sources.
type Table struct {
	mu      sync.Mutex
	sources map[*entry]Source
}

// entry keys a source; it is not empty, since pointers to distinct
// zero-size values may be equal.
type entry struct{ _ byte }

var tables = dshctx.NewLocal(func() *Table { return &Table{sources: map[*entry]Source{}} })

// Of returns the Table of ctx's tree.
func Of(ctx *dshctx.Context) *Table { return tables.Get(ctx) }

// Add lists s until remove is called.
func (t *Table) Add(s Source) (remove func()) {
	e := &entry{}
	t.mu.Lock()
	t.sources[e] = s
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.sources, e)
		t.mu.Unlock()
	}
}

func (t *Table) snapshot() []Source {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Source, 0, len(t.sources))
	for _, s := range t.sources {
		out = append(out, s)
	}
	return out
}

// List returns agentID's jobs from every source, by start time.
func (t *Table) List(agentID string) []Info {
	var out []Info
	for _, s := range t.snapshot() {
		out = append(out, s.Jobs(agentID)...)
	}
	slices.SortStableFunc(out, func(a, b Info) int {
		if c := a.Started.Compare(b.Started); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Kill ends agentID's job id, as a person asked (by names who, for the
// job's status). It fails with NotFound when no source has the job.
func (t *Table) Kill(agentID, id, by string) error {
	for _, s := range t.snapshot() {
		if s.Kill(agentID, id, by) {
			return nil
		}
	}
	return errs.New(NotFound, "agent "+agentID+" has no job "+id+"; /jobs lists them")
}
