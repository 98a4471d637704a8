package serve

import (
	"net/http"

	"github.com/dsh-go/dsh/services/sessions"
)

// planRequest is the body of POST /v1/sessions/{id}/plan.
type planRequest struct {
	// Op is enter, leave, edit or get.
	Op string `json:"op"`
	// Plan is the whole new plan of an edit, Markdown.
	Plan string `json:"plan,omitempty"`
}

// getPlan answers the session's plan state: plan mode, the plan and the
// todo list.
func (s *Server) getPlan(w http.ResponseWriter, r *http.Request) {
	s.plan(w, r, sessions.PlanRequest{Op: sessions.PlanGet, By: "api"})
}

// postPlan enters or leaves plan mode, or edits the plan, for the person
// behind the request: leaving is their approval.
func (s *Server) postPlan(w http.ResponseWriter, r *http.Request) {
	var req planRequest
	if err := s.decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	pr := sessions.PlanRequest{Op: req.Op, Plan: req.Plan, By: "api"}
	if err := sessions.ValidPlanOp(pr); err != nil {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "%v; send {\"op\": \"enter\"}, {\"op\": \"leave\"} or {\"op\": \"edit\", \"plan\": \"<markdown>\"}", err))
		return
	}
	s.plan(w, r, pr)
}

// enterPlan puts a session just opened in plan mode; when its agent has
// none, the session is closed again, so the request leaves nothing behind.
func (s *Server) enterPlan(r *http.Request, id string) error {
	_, err := s.o.Sessions.Plan(r.Context(), id, sessions.PlanRequest{Op: sessions.PlanEnter, By: "api"})
	if err != nil {
		_ = s.o.Sessions.Close(r.Context(), id)
	}
	return err
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request, pr sessions.PlanRequest) {
	id := r.PathValue("id")
	st, err := s.o.Sessions.Plan(r.Context(), id, pr)
	if err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), id, err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}
