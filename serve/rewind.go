package serve

import (
	"net/http"

	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// rewindRequest is the body of POST /v1/sessions/{id}/rewind.
type rewindRequest struct {
	// To is "TURN" or "TURN.STEP"; not with redo.
	To           string `json:"to,omitempty"`
	Code         bool   `json:"code,omitempty"`
	Conversation bool   `json:"conversation,omitempty"`
	Force        bool   `json:"force,omitempty"`
	Redo         bool   `json:"redo,omitempty"`
}

// rewind takes an open session back to before a turn or step, or redoes
// its last rewind, and answers with the event that records it.
func (s *Server) rewind(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req rewindRequest
	if err := s.decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	rr := sessions.RewindRequest{Code: req.Code, Conversation: req.Conversation, Force: req.Force, Redo: req.Redo}
	switch {
	case req.Redo && req.To != "":
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "send either to (a rewind) or redo: true (undo the last rewind), not both"))
		return
	case !req.Redo:
		p, err := session.ParsePoint(req.To)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		rr.To = p
	}
	ctx := sessions.WithActor(r.Context(), "an HTTP client ("+r.RemoteAddr+")")
	res, err := s.o.Sessions.Rewind(ctx, id, rr)
	if err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), id, err))
		return
	}
	writeJSON(w, http.StatusOK, res.Event)
}
