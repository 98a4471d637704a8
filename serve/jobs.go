package serve

import (
	"fmt"
	"net/http"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/jobs"
)

// A job id the agent has no job under is a 404. (Set here rather than in
// errors.go's table, beside the routes that answer it.)
func init() { statusOf[jobs.NotFound] = http.StatusNotFound }

// listJobs is GET /v1/sessions/{id}/jobs: the background jobs of an open
// session's agent, running and recently ended. Jobs live on the host that
// runs the session: a session another cluster member owns lists none here.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := s.o.Sessions.Info(r.Context(), id)
	if err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), id, err))
		return
	}
	list := []jobs.Info{}
	if s.o.Jobs != nil {
		list = append(list, s.o.Jobs.List(in.AgentID)...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": list})
}

// killJob is POST /v1/sessions/{id}/jobs/{job}/kill: the job and its
// whole process group end, and the answer comes once they have. The agent
// is told of the end as of any job that ends unread (tools.bash
// jobs.wake).
func (s *Server) killJob(w http.ResponseWriter, r *http.Request) {
	id, job := r.PathValue("id"), r.PathValue("job")
	in, err := s.o.Sessions.Info(r.Context(), id)
	if err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), id, err))
		return
	}
	if s.o.Jobs == nil {
		s.writeError(w, r, errs.New(jobs.NotFound, fmt.Sprintf("session %q has no job %q: this server keeps no jobs", id, job)))
		return
	}
	if err := s.o.Jobs.Kill(in.AgentID, job, "the HTTP API ("+r.RemoteAddr+")"); err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, j := range s.o.Jobs.List(in.AgentID) {
		if j.ID == job {
			writeJSON(w, http.StatusOK, j)
			return
		}
	}
	writeJSON(w, http.StatusOK, jobs.Info{ID: job, AgentID: in.AgentID, Status: "killed"})
}
