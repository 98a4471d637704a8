package serve

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/google/uuid"
)

// maxEvents bounds one page of GET .../events.
const maxEvents = 1000

// openSession checks that session id is open; one only persisted is
// SESSION_CLOSED (resume it), an unknown one 404.
func (s *Server) openSession(r *http.Request, id string) error {
	_, err := s.o.Sessions.Info(r.Context(), id)
	if err != nil {
		return s.notOpen(r.Context(), id, err)
	}
	return nil
}

type messageRequest struct {
	RequestID string `json:"request_id"`
	Content   string `json:"content"`
	Mode      string `json:"mode,omitempty"`
	// Parts are attachments with their bytes in base64, for clients that
	// script JSON; a browser uploads multipart/form-data instead.
	Parts []partRequest `json:"parts,omitempty"`
}

// partRequest is one attachment of a JSON message. It carries bytes only:
// a part naming a ref would let a client take a blob of another session
// by its hash.
type partRequest struct {
	Type      llm.PartType `json:"type"`
	MediaType string       `json:"media_type,omitempty"`
	Name      string       `json:"name,omitempty"`
	Data      []byte       `json:"data"`
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	req, parts, err := s.readMessage(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(req.Content) == "" && len(parts) == 0 {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "content is empty and nothing is attached; send the text of the message in content, or attach a file"))
		return
	}
	if req.RequestID == "" {
		// Without an id a retry would be delivered twice; the answer
		// gives the client the one made for it.
		req.RequestID = "http-" + uuid.NewString()
	}
	sid := r.PathValue("id")
	p := sessions.PromptRequest{RequestID: req.RequestID, Content: req.Content, Parts: parts, Source: sourceOf(r)}
	send := s.o.Sessions.Prompt
	switch req.Mode {
	case "", "followup":
	case "steer":
		send = s.o.Sessions.Steer
	default:
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "mode %q is not a mode; send \"followup\" (the default: queued for a turn) or \"steer\" (handed to the running turn)", req.Mode))
		return
	}
	// No check that the session is open first: the service decides (a
	// cluster's forwards the message to the session's host, or claims a
	// session open nowhere), and its SESSION_NOT_FOUND is answered after.
	turn, err := send(r.Context(), sid, p)
	if err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), sid, err))
		return
	}
	out := accepted{MessageID: turn.MessageID, RequestID: req.RequestID}
	// A retry of a message a turn already took says which turn, and
	// whether it started it or joined it.
	if o, ok, _ := s.o.Sessions.Outcome(r.Context(), sid, req.RequestID); ok && o.MessageID == turn.MessageID &&
		(o.Outcome == sessions.FateDelivered || o.Outcome == sessions.FateMerged) {
		out.Delivered = &delivered{Outcome: string(o.Outcome), Type: string(o.Type), Turn: o.Turn, Seq: o.Seq}
	}
	writeJSON(w, http.StatusAccepted, out)
}

// accepted answers a message the agent's inbox took (or had taken, for a
// retry).
type accepted struct {
	MessageID string `json:"message_id"`
	RequestID string `json:"request_id"`
	// Delivered is set on a retry of a message a turn already took.
	Delivered *delivered `json:"delivered,omitempty"`
}

// delivered is the log event that recorded a message's delivery.
type delivered struct {
	// Outcome is "delivered" (the message started the turn) or "merged"
	// (it joined a turn another message started).
	Outcome string `json:"outcome"`
	Type    string `json:"type"`
	Turn    int    `json:"turn"`
	Seq     int64  `json:"seq"`
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// The messages the cancel drops record who cancelled.
	ctx := sessions.WithActor(r.Context(), "an HTTP client ("+r.RemoteAddr+")")
	if err := s.o.Sessions.Cancel(ctx, id); err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), id, err))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.openSession(r, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	qs := []live.Question{}
	if h, ok := s.holding(id); ok {
		qs = h.approver.Pending()
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": qs})
}

type answerRequest struct {
	Choice approval.Choice `json:"choice"`
	Reason string          `json:"reason,omitempty"`
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	qid, err := strconv.ParseInt(r.PathValue("qid"), 10, 64)
	if err != nil || qid <= 0 {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "question id %q is not a positive integer; GET /v1/sessions/%s/approvals lists the open questions", r.PathValue("qid"), id))
		return
	}
	var req answerRequest
	if err := s.decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch req.Choice {
	case approval.AllowOnce, approval.AllowSession, approval.Deny:
	default:
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "choice %q is not an answer; send \"allow-once\", \"allow-session\" or \"deny\"", req.Choice))
		return
	}
	if err := s.openSession(r, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	h, ok := s.holding(id)
	if !ok {
		s.writeError(w, r, errs.New(live.QuestionClosed, fmt.Sprintf("session %q was not opened by this server, which answers none of its questions", id)))
		return
	}
	if err := h.approver.Answer(qid, approval.Answer{Choice: req.Choice, Reason: req.Reason}); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// events pages through a session's durable events: after the seq given,
// at most limit of them, from the open session's log or the store.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after, err := queryInt(r, "after", 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit", maxEvents)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit = min(max(limit, 1), maxEvents)
	// An open session's last seq is its Info's (the log may have grown
	// past the page); a closed one's is its stored log's end.
	in, open := s.info(r.Context(), id)
	from := after
	if !open {
		from = 0
		if _, found, err := s.persisted(r.Context(), id); err != nil || !found {
			if err == nil {
				err = notFound(id)
			}
			s.writeError(w, r, err)
			return
		}
	}
	page := []session.Event{}
	if open && after >= in.LastSeq {
		writeJSON(w, http.StatusOK, map[string]any{"events": page, "last_seq": in.LastSeq})
		return
	}
	evs, err := s.o.Sessions.History(r.Context(), id, from)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	last := in.LastSeq
	if !open && len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	for _, e := range evs {
		if int64(len(page)) == limit {
			break
		}
		if e.Seq > after {
			page = append(page, e)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": page, "last_seq": last})
}

func queryInt(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fail(http.StatusBadRequest, BadRequest, "query %s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}
