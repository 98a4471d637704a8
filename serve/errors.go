package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// Codes of the HTTP server. They are stable: clients match them as strings.
const (
	// BadRequest: the body is not the JSON the route takes, or a path or
	// query argument is malformed.
	BadRequest errs.Code = "SERVE_BAD_REQUEST"
	// Unauthorized: no bearer token, or the wrong one.
	Unauthorized errs.Code = "SERVE_UNAUTHORIZED"
	// RouteNotFound: no route has the path.
	RouteNotFound errs.Code = "SERVE_NOT_FOUND"
	// MethodNotAllowed: the path exists, not with that method.
	MethodNotAllowed errs.Code = "SERVE_METHOD_NOT_ALLOWED"
	// BodyTooLarge: the body exceeds serve.max_body_bytes.
	BodyTooLarge errs.Code = "SERVE_BODY_TOO_LARGE"
	// ShuttingDown: the server is shutting down and takes no new request.
	ShuttingDown errs.Code = "SERVE_SHUTTING_DOWN"
	// CORSRefused: a browser preflight from an origin serve.cors_origins
	// does not list.
	CORSRefused errs.Code = "SERVE_CORS_REFUSED"
	// NoToken: the server has no token and is not told to run without.
	NoToken errs.Code = "SERVE_NO_TOKEN"
)

// apiError is the JSON body of every non-2xx response.
type apiError struct {
	Code      errs.Code `json:"code"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message"`
	Presented *bool     `json:"presented,omitempty"`
	RequestID string    `json:"request_id,omitempty"`

	status int
}

func fail(status int, code errs.Code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// statusOf maps the codes of the services behind the API to a status; a
// code it does not know is a 500.
var statusOf = map[errs.Code]int{
	errs.InvalidArgument:    http.StatusBadRequest,
	BadRequest:              http.StatusBadRequest,
	host.SpecInvalid:        http.StatusBadRequest,
	live.BadSeq:             http.StatusBadRequest,
	sessions.NotFound:       http.StatusNotFound,
	session.SessionLocked:   http.StatusConflict,
	session.SessionExists:   http.StatusConflict,
	agents.AgentExists:      http.StatusConflict,
	sessions.Closed:         http.StatusConflict,
	live.QuestionClosed:     http.StatusConflict,
	session.NoPersistence:   http.StatusConflict,
	sessions.PromptRejected: http.StatusUnprocessableEntity,
	sessions.Stopped:        http.StatusServiceUnavailable,
	host.Closed:             http.StatusServiceUnavailable,
	ShuttingDown:            http.StatusServiceUnavailable,
	errs.ContextInactive:    http.StatusServiceUnavailable,
}

// toAPI turns what a service returned into the response body, keeping its
// code, reason and message; a refusal also carries presented and the
// request id.
func toAPI(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if r, ok := sessions.RejectionOf(err); ok {
		return &apiError{status: http.StatusUnprocessableEntity, Code: sessions.PromptRejected,
			Reason: r.Reason, Message: r.Message, Presented: &r.Presented, RequestID: r.RequestID}
	}
	code := errs.CodeOf(err)
	status, known := statusOf[code]
	if !known {
		status = http.StatusInternalServerError
	}
	if code == "" {
		code = errs.Internal
	}
	out := &apiError{status: status, Code: code, Reason: errs.ReasonOf(err), Message: err.Error()}
	var e *errs.Error
	if errors.As(err, &e) {
		out.Message = e.Message
		if e.Cause != nil && status == http.StatusInternalServerError {
			out.Message += ": " + e.Cause.Error()
		}
	}
	return out
}

// writeError answers with err's status and JSON body.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPI(err)
	if ae.status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", ae.status, "code", ae.Code, "error", ae.Message)
	}
	writeJSON(w, ae.status, ae)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Code: errs.Internal, Message: "encoding the response failed: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (e *apiError) Error() string { return string(e.Code) + ": " + e.Message }
