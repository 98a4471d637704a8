package serve

import (
	"net/http"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/serve/apierr"
	"github.com/dsh-go/dsh/services/sessions"
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
	BodyTooLarge = apierr.BodyTooLarge
	// ShuttingDown: the server is shutting down and takes no new request.
	ShuttingDown = apierr.ShuttingDown
	// CORSRefused: a browser preflight from an origin serve.cors_origins
	// does not list.
	CORSRefused errs.Code = "SERVE_CORS_REFUSED"
	// HostRefused: a server without a token got a request for a Host
	// that is not a loopback name (DNS rebinding).
	HostRefused errs.Code = "SERVE_HOST_REFUSED"
	// NoToken: the server has no token and is not told to run without.
	NoToken errs.Code = "SERVE_NO_TOKEN"
	// WorkspaceRefused: a session was asked for on a workspace that is
	// neither its agent's nor under serve.workspaces.
	WorkspaceRefused errs.Code = "SERVE_WORKSPACE_REFUSED"
	// PresetRefused: a session was asked for with a preset that
	// serve.client_presets does not list.
	PresetRefused errs.Code = "SERVE_PRESET_REFUSED"
	// StreamBehind: an event stream's client left more than the stream's
	// buffer (Options.StreamBuffer) unread and was dropped; the code of
	// the stream's drop message, never of a response.
	StreamBehind errs.Code = "SERVE_STREAM_BEHIND"
)

// fail is an error the server decides itself.
var fail = apierr.New

// statusOf maps the server's own codes; apierr maps the services' (the
// cluster's included), for the webhooks as for the API.
var statusOf = map[errs.Code]int{
	BadRequest:       http.StatusBadRequest,
	Unauthorized:     http.StatusUnauthorized,
	RouteNotFound:    http.StatusNotFound,
	MethodNotAllowed: http.StatusMethodNotAllowed,
	CORSRefused:      http.StatusForbidden,
	HostRefused:      http.StatusForbidden,
	WorkspaceRefused: http.StatusForbidden,
	PresetRefused:    http.StatusForbidden,
	// The agent has no plan mode: the session is there, the operation
	// cannot apply to it.
	sessions.NoPlanMode: http.StatusConflict,
}

// writeError answers with err's status and JSON body; a server-side
// failure is logged.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := apierr.Write(w, err, statusOf, "")
	if ae.Status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", ae.Status, "code", ae.Code, "error", ae.Message)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) { apierr.WriteJSON(w, status, v) }
