package serve

import (
	"net/http"
	"strings"
)

// pageHandler serves "/" and "/assets/"; the embedded web page replaces
// this placeholder (serve/web).
var pageHandler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/assets/") {
		writeJSON(w, http.StatusNotFound, fail(0, RouteNotFound, "no asset %s", r.URL.Path))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte("<!doctype html><title>dsh serve</title><p>dsh serve is running. The API is described at <a href=\"/openapi.json\">/openapi.json</a>.</p>\n"))
})

func (s *Server) page(w http.ResponseWriter, r *http.Request) { pageHandler.ServeHTTP(w, r) }

// hooks hands /hooks/{name} to Options.Hooks, which checks each
// delivery's signature itself.
func (s *Server) hooks(w http.ResponseWriter, r *http.Request) {
	if s.o.Hooks == nil {
		writeJSON(w, http.StatusNotFound, fail(0, RouteNotFound, "no webhooks are served here; configure them under serve.webhooks"))
		return
	}
	s.o.Hooks.ServeHTTP(w, r)
}
