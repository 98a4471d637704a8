// Package apierr is the one error shape of dsh serve: every non-2xx answer,
// the API's and the webhooks', is a JSON Body with a stable code, and each
// code maps to one HTTP status here, so a client reads the same thing for
// the same failure whichever route it called.
package apierr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve/unattended"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// Codes every part of the server answers with.
const (
	// BodyTooLarge: the body exceeds the route's limit.
	BodyTooLarge errs.Code = "SERVE_BODY_TOO_LARGE"
	// ShuttingDown: the server is shutting down and takes no new request.
	ShuttingDown errs.Code = "SERVE_SHUTTING_DOWN"
)

// Body is the JSON body of every non-2xx response. Presented and
// RequestID are set for a refused prompt (the seed's
// session/prompt-rejected): Presented says the refusing plugin already
// showed the refusal to the user.
type Body struct {
	Code      errs.Code `json:"code"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message"`
	Presented *bool     `json:"presented,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	// Outcome is what became of a message that was not delivered: its
	// drop (AGENT_MESSAGE_DROPPED), refusal or expiry (a refused prompt's).
	// A value, so that bodies compare with ==; omitted when zero.
	Outcome Outcome `json:"outcome,omitzero"`

	// Status is the HTTP status it is sent with.
	Status int `json:"-"`
}

func (b *Body) Error() string { return string(b.Code) + ": " + b.Message }

// Outcome is what became of a message that was not delivered: dropped
// (the agent controller's AGENT_MESSAGE_DROPPED details), refused or
// expired (a refused prompt's).
type Outcome struct {
	// Outcome is "dropped", "refused" or "expired".
	Outcome   string `json:"outcome"`
	MessageID string `json:"message_id,omitempty"`
	// RequestID is set for a drop; a refusal's is the body's.
	RequestID string `json:"request_id,omitempty"`
	// Turn is the turn that ran when the message was dropped or refused;
	// Seq is the log event that recorded it, set once it is written (a
	// retry's answer).
	Turn int   `json:"turn"`
	Seq  int64 `json:"seq,omitempty"`
	// Dropped is "cancelled" or "closed"; By is who did it.
	Dropped string `json:"dropped,omitempty"`
	By      string `json:"by,omitempty"`
	// Recorded says the answer is a retry's, read from the record of the
	// first attempt.
	Recorded bool `json:"recorded,omitempty"`
}

// outcomeOf reads the details of a MessageDropped error, also after they
// crossed a host boundary as JSON (numbers then come back as float64).
func outcomeOf(d map[string]any) Outcome {
	o := Outcome{Outcome: "dropped", Recorded: true}
	o.MessageID, _ = d["message_id"].(string)
	o.RequestID, _ = d["request_id"].(string)
	o.Dropped, _ = d["dropped"].(string)
	o.By, _ = d["by"].(string)
	switch n := d["turn"].(type) {
	case int:
		o.Turn = n
	case float64:
		o.Turn = int(n)
	}
	return o
}

// New is a Body the server decides itself.
func New(status int, code errs.Code, format string, args ...any) *Body {
	return &Body{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// statuses maps the codes of the services behind the server, for every
// entry point that answers over HTTP (the API, the webhooks): one table,
// so a code means the same status whichever route returned it. A code no
// table knows is a 500.
var statuses = map[errs.Code]int{
	errs.InvalidArgument:    http.StatusBadRequest,
	host.SpecInvalid:        http.StatusBadRequest,
	live.BadSeq:             http.StatusBadRequest,
	sessions.NotFound:       http.StatusNotFound,
	sessions.NoGoal:         http.StatusNotFound,
	sessions.GoalConflict:   http.StatusConflict,
	session.SessionLocked:   http.StatusConflict,
	session.SessionExists:   http.StatusConflict,
	sessions.AgentExists:    http.StatusConflict,
	sessions.Closed:         http.StatusConflict,
	live.QuestionClosed:     http.StatusConflict,
	session.NoPersistence:   http.StatusConflict,
	sessions.PromptRejected: http.StatusUnprocessableEntity,
	// A retry of a message that was dropped: the request id is spent.
	sessions.MessageDropped: http.StatusConflict,
	// A request id spent on another message: retrying cannot help.
	sessions.RequestIDReused: http.StatusConflict,
	// Rewinds (docs/rewind.md).
	session.RewindBadPoint:    http.StatusBadRequest,
	session.NothingToRedo:     http.StatusConflict,
	sessions.RewindBusy:       http.StatusConflict,
	sessions.NoCheckpoints:    http.StatusConflict,
	sessions.WorkspaceChanged: http.StatusConflict,
	BodyTooLarge:              http.StatusRequestEntityTooLarge,
	cluster.PayloadTooLarge:   http.StatusRequestEntityTooLarge,
	// A part over a limit is a body too large, bytes that are not what
	// they claim an unsupported media type, a malformed part a bad
	// request.
	attachments.TooLarge:      http.StatusRequestEntityTooLarge,
	attachments.TooMany:       http.StatusRequestEntityTooLarge,
	attachments.StoreFull:     http.StatusInsufficientStorage,
	attachments.MediaMismatch: http.StatusUnsupportedMediaType,
	attachments.BadPart:       http.StatusBadRequest,
	attachments.NotFound:      http.StatusNotFound,
	attachments.StoreFailed:   http.StatusInternalServerError,
	// Temporarily unavailable: the same request succeeds later (with its
	// request id, at most once), so it is a 503 with Retry-After. The
	// server or a session controller stopping; in a cluster, the owner or
	// the NATS server away, or no live host to take the session.
	sessions.Stopped:         http.StatusServiceUnavailable,
	host.Closed:              http.StatusServiceUnavailable,
	ShuttingDown:             http.StatusServiceUnavailable,
	errs.ContextInactive:     http.StatusServiceUnavailable,
	unattended.Closed:        http.StatusServiceUnavailable,
	cluster.OwnerUnreachable: http.StatusServiceUnavailable,
	cluster.Unreachable:      http.StatusServiceUnavailable,
	cluster.NoHost:           http.StatusServiceUnavailable,
	natsplugin.Unreachable:   http.StatusServiceUnavailable,
}

// passing are the reasons that make a code temporarily unavailable (503)
// where it otherwise is not. SESSION_LOCKED held elsewhere for now:
// another process or host writes the session (in a cluster, one taking it
// over), the writer here lost it to another (fenced) while it moved, or an
// agent is still letting it go — the others (open here, closing here) ask
// the caller to act and stay 409. ATTACHMENT_STORE_FAILED of a shared
// store that did not answer or stayed locked; a directory that cannot be
// written stays 500.
var passing = map[errs.Code]map[string]bool{
	session.SessionLocked: {
		session.ReasonOtherProcess: true,
		session.ReasonFenced:       true,
		session.ReasonClosing:      true,
	},
	attachments.StoreFailed: {
		attachments.ReasonUnreachable: true,
		attachments.ReasonLockBusy:    true,
	},
}

// RetryAfter is the Retry-After of every 503, in seconds: long enough not
// to hammer a host that is taking a session over, short against the
// seconds a takeover takes (lease_ttl + 2 s at most).
const RetryAfter = 1

// Status is the HTTP status of err, with own mapping the caller's own
// codes first: the one mapping of dsh serve's entry points.
func Status(err error, own map[errs.Code]int) int {
	return status(errs.CodeOf(err), errs.ReasonOf(err), own)
}

func status(code errs.Code, reason string, own map[errs.Code]int) int {
	if s, ok := own[code]; ok {
		return s
	}
	if passing[code][reason] {
		return http.StatusServiceUnavailable
	}
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// From turns what a service returned into a Body, keeping its code,
// reason and message; own maps the caller's own codes to their statuses.
// A refused prompt also carries presented and its request id.
func From(err error, own map[errs.Code]int) *Body {
	if b, ok := errors.AsType[*Body](err); ok {
		return b
	}
	if r, ok := sessions.RejectionOf(err); ok {
		b := &Body{Status: http.StatusUnprocessableEntity, Code: sessions.PromptRejected,
			Reason: r.Reason, Message: r.Message, Presented: &r.Presented, RequestID: r.RequestID}
		if r.Outcome != "" {
			b.Outcome = Outcome{Outcome: string(r.Outcome), Turn: r.Turn, Seq: r.Seq, Recorded: r.Recorded}
		}
		return b
	}
	code := errs.CodeOf(err)
	status := status(code, errs.ReasonOf(err), own)
	if code == "" {
		code = errs.Internal
	}
	out := &Body{Status: status, Code: code, Reason: errs.ReasonOf(err), Message: err.Error()}
	if e, ok := errors.AsType[*errs.Error](err); ok {
		out.Message = e.Message
		if e.Code == sessions.MessageDropped {
			out.Outcome = outcomeOf(e.Details)
			out.RequestID = out.Outcome.RequestID
		}
		// A cause that is one of ours was summarized by the outer message;
		// a foreign one (a template's, a reader's) says what went wrong.
		if _, ours := errors.AsType[*errs.Error](e.Cause); e.Cause != nil && (!ours || status == http.StatusInternalServerError) {
			out.Message += ": " + e.Cause.Error()
		}
	}
	return out
}

// Write answers err with its status and Body, and returns the Body (for
// the caller's log). requestID fills a Body that has none. A 503 says when
// to retry (Retry-After).
func Write(w http.ResponseWriter, err error, own map[errs.Code]int, requestID string) *Body {
	b := From(err, own)
	if b.RequestID == "" && requestID != "" {
		c := *b
		c.RequestID = requestID
		b = &c
	}
	if b.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
	}
	WriteJSON(w, b.Status, b)
	return b
}

// WriteJSON answers with status and v as JSON, never cached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(Body{Code: errs.Internal, Message: "encoding the response failed: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
