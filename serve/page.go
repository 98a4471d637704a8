package serve

import (
	"net/http"

	"github.com/dsh-go/dsh/serve/web"
)

// pageHandler serves "/" and "/assets/": the embedded web page.
var pageHandler = web.Handler()

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
