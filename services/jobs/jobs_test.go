package jobs_test

import (
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/jobs"
)

// source is a plugin instance's jobs, as the table sees them.
type source struct {
	list   map[string][]jobs.Info
	killed []string
}

func (s *source) Jobs(agentID string) []jobs.Info { return s.list[agentID] }

func (s *source) Kill(agentID, id, by string) bool {
	for _, in := range s.list[agentID] {
		if in.ID == id {
			s.killed = append(s.killed, agentID+"/"+id+" by "+by)
			return true
		}
	}
	return false
}

// TestTheTableMergesItsSourcesPerTree: two sources' jobs of an agent come
// back by start time; another tree sees none of them; a removed source is
// gone; a kill reaches the source holding the job, and an unknown one
// fails with NotFound.
func TestTheTableMergesItsSourcesPerTree(t *testing.T) {
	root, other := dshctx.New(), dshctx.New()
	ctxtest.Cleanup(t, root)
	ctxtest.Cleanup(t, other)
	t0 := time.Now()
	a := &source{list: map[string][]jobs.Info{"ag": {{ID: "job-2", Started: t0.Add(2 * time.Second)}}}}
	b := &source{list: map[string][]jobs.Info{"ag": {{ID: "job-1", Started: t0}}, "other": {{ID: "job-1"}}}}
	jobs.Of(root).Add(a)
	removeB := jobs.Of(root).Add(b)
	got := jobs.Of(root).List("ag")
	if len(got) != 2 || got[0].ID != "job-1" || got[1].ID != "job-2" {
		t.Fatalf("listed %+v", got)
	}
	if got := jobs.Of(other).List("ag"); len(got) != 0 {
		t.Fatalf("another tree lists %+v", got)
	}
	if err := jobs.Of(root).Kill("ag", "job-2", "/jobs"); err != nil || len(a.killed) != 1 || a.killed[0] != "ag/job-2 by /jobs" {
		t.Fatalf("kill: %v %v", err, a.killed)
	}
	removeB()
	if got := jobs.Of(root).List("ag"); len(got) != 1 {
		t.Fatalf("a removed source is still listed: %+v", got)
	}
	if err := jobs.Of(root).Kill("ag", "job-1", "/jobs"); !errs.HasCode(err, jobs.NotFound) {
		t.Fatalf("a job no source has: %v", err)
	}
}
