package serve

import (
	"net/http"

	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// The goal routes set, show, pause, resume and clear a session's goal
// through the session service, which runs them where the session runs
// (a cluster forwards them to its owner). The caller's principal is the
// goal's: its continuations are sent from it, through entry "goal".

// goalRequest is the body of POST .../goal and .../goal/resume.
type goalRequest struct {
	Objective string             `json:"objective"`
	Budget    session.GoalBudget `json:"budget,omitzero"`
}

func (s *Server) goal(op sessions.GoalOp) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		req := sessions.GoalRequest{Op: op, Source: sourceOf(r)}
		switch op {
		case sessions.GoalSet, sessions.GoalResume:
			var body goalRequest
			if err := s.decode(r, &body, op == sessions.GoalResume); err != nil {
				s.writeError(w, r, err)
				return
			}
			if op == sessions.GoalResume && body.Objective != "" {
				s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "a resume keeps the goal's objective; to change it, POST /v1/sessions/%s/goal with the new one", id))
				return
			}
			req.Objective, req.Budget = body.Objective, body.Budget
		}
		ctx := sessions.WithActor(r.Context(), "an HTTP client ("+r.RemoteAddr+")")
		g, err := s.o.Sessions.Goal(ctx, id, req)
		if err != nil {
			s.writeError(w, r, s.notOpen(r.Context(), id, err))
			return
		}
		writeJSON(w, http.StatusOK, g)
	}
}
