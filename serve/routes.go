package serve

import (
	"github.com/dsh-go/dsh/telemetry"
	"net/http"
	"strings"
	"time"

	"github.com/dsh-go/dsh/serve/apierr"
	"github.com/dsh-go/dsh/services/sessions"
)

// route is one pattern the server answers. Doc is the path as the OpenAPI
// document writes it, when it differs from the pattern's.
type route struct {
	method, path string
	public       bool
	doc          string
	handle       http.HandlerFunc
}

func (r route) pattern() string { return r.method + " " + r.path }

// DocPath is the route's OpenAPI path: "/assets/" is "/assets/{path}".
func (r route) docPath() string {
	if r.doc != "" {
		return r.doc
	}
	return r.path
}

func (s *Server) table() []route {
	return []route{
		{method: "GET", path: "/{$}", doc: "/", public: true, handle: s.page},
		{method: "GET", path: "/assets/", doc: "/assets/{path}", public: true, handle: s.page},
		{method: "GET", path: "/openapi.json", public: true, handle: s.openAPI},
		{method: "POST", path: "/hooks/{name}", public: true, handle: s.hooks},
		{method: "GET", path: "/v1/health", public: true, handle: s.health},
		{method: "GET", path: "/v1/agents", handle: s.agents},
		{method: "GET", path: "/v1/sessions", handle: s.listSessions},
		{method: "POST", path: "/v1/sessions", handle: s.createSession},
		{method: "GET", path: "/v1/sessions/{id}", handle: s.getSession},
		{method: "DELETE", path: "/v1/sessions/{id}", handle: s.deleteSession},
		{method: "POST", path: "/v1/sessions/{id}/resume", handle: s.resumeSession},
		{method: "POST", path: "/v1/sessions/{id}/close", handle: s.closeSession},
		{method: "POST", path: "/v1/sessions/{id}/messages", handle: s.postMessage},
		{method: "POST", path: "/v1/sessions/{id}/cancel", handle: s.cancel},
		{method: "POST", path: "/v1/sessions/{id}/rewind", handle: s.rewind},
		{method: "GET", path: "/v1/sessions/{id}/approvals", handle: s.listApprovals},
		{method: "POST", path: "/v1/sessions/{id}/approvals/{qid}", handle: s.answer},
		{method: "GET", path: "/v1/sessions/{id}/events", handle: s.events},
		{method: "GET", path: "/v1/sessions/{id}/stream", handle: s.stream},
		{method: "GET", path: "/v1/sessions/{id}/attachments/{ref}", handle: s.attachment},
		{method: "GET", path: "/v1/sessions/{id}/jobs", handle: s.listJobs},
		{method: "POST", path: "/v1/sessions/{id}/jobs/{job}/kill", handle: s.killJob},
		{method: "GET", path: "/v1/sessions/{id}/plan", handle: s.getPlan},
		{method: "POST", path: "/v1/sessions/{id}/plan", handle: s.postPlan},
		{method: "GET", path: "/v1/sessions/{id}/goal", handle: s.goal(sessions.GoalShow)},
		{method: "POST", path: "/v1/sessions/{id}/goal", handle: s.goal(sessions.GoalSet)},
		{method: "DELETE", path: "/v1/sessions/{id}/goal", handle: s.goal(sessions.GoalClear)},
		{method: "POST", path: "/v1/sessions/{id}/goal/pause", handle: s.goal(sessions.GoalPause)},
		{method: "POST", path: "/v1/sessions/{id}/goal/resume", handle: s.goal(sessions.GoalResume)},
		// The web page's own routes (pageapi.go).
		{method: "POST", path: "/v1/render", handle: s.render},
		{method: "GET", path: "/v1/pricing", handle: s.pricing},
		{method: "GET", path: "/v1/titles", handle: s.listTitles},
		{method: "POST", path: "/v1/sessions/{id}/title", handle: s.setTitle},
	}
}

// build makes the mux and wraps it: shutdown, CORS, auth, body limit, and
// JSON bodies for the mux's own 404 and 405.
func (s *Server) build() http.Handler {
	mux := http.NewServeMux()
	s.mux = mux
	s.routes = s.table()
	for _, rt := range s.routes {
		h := http.Handler(rt.handle)
		if strings.Contains(rt.path, "{id}") {
			// The tenant check of every route that names a session.
			h = s.scoped(h)
		}
		if !rt.public {
			h = s.authorize(h)
		}
		mux.Handle(rt.pattern(), h)
	}
	if s.o.Metrics != nil {
		// An operator's endpoint, not part of the API document.
		mux.Handle("GET /metrics", s.authorize(s.operatorOnly(s.o.Metrics)))
	}
	// A span per request, continuing the trace of an incoming traceparent
	// (a webhook's sender, a client that traces); nothing when off.
	traced := telemetry.Middleware("dsh serve", mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.active.Add(1)
		defer s.active.Done()
		sw := &statusWriter{ResponseWriter: w}
		// The line is written after the request's span ended; the
		// RequestLog keeps the span's ids for it.
		ctx, rl := telemetry.WithRequestLog(r)
		if rl != nil {
			r = r.WithContext(ctx)
		}
		defer func() {
			// Method, path and status only: headers carry the token.
			s.log.DebugContext(rl.Context(), "request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "duration", time.Since(start))
		}()
		if s.stopping.Load() {
			apierr.Write(sw, fail(http.StatusServiceUnavailable, ShuttingDown, "dsh serve is shutting down and takes no new requests; retry against the restarted server"), nil, "")
			return
		}
		if s.o.NoAuth && !loopbackHost(r.Host) {
			// Without a token, a name rebound to 127.0.0.1 would let any
			// site's page drive the server as if it were its own origin.
			writeJSON(sw, http.StatusForbidden, fail(0, HostRefused, "a server without a token answers only requests to localhost or a loopback IP, and this one was sent to %q; open the page at http://127.0.0.1:<port>/, or set a token", r.Host))
			return
		}
		if !s.cors(sw, r) {
			return
		}
		// A webhook bounds its deliveries by its own max_body_bytes, which
		// may be larger than the API's; an upload by the attachments'.
		if r.Body != nil && !(s.o.Hooks != nil && strings.HasPrefix(r.URL.Path, "/hooks/")) {
			r.Body = http.MaxBytesReader(sw, r.Body, s.bodyLimit(r))
		}
		h, pattern := mux.Handler(r)
		if pattern == "" {
			s.unmatched(sw, r, h)
			return
		}
		traced.ServeHTTP(sw, r)
	})
}

// unmatched answers a request no route takes with the mux's status (404,
// or 405 with its Allow header) and a JSON body.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request, h http.Handler) {
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, fail(0, MethodNotAllowed, "%s does not take %s; it takes %s", r.URL.Path, r.Method, allow))
		return
	}
	if strings.HasPrefix(r.URL.Path, "/hooks/") {
		writeJSON(w, http.StatusNotFound, fail(0, RouteNotFound, "no webhook is served at %s; webhooks are configured under serve.webhooks", r.URL.Path))
		return
	}
	writeJSON(w, http.StatusNotFound, fail(0, RouteNotFound, "no route %s %s; GET /openapi.json lists the routes", r.Method, r.URL.Path))
}

// headerProbe records what the mux's fallback handler would answer.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }

// statusWriter remembers the status for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush through the wrapper.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
