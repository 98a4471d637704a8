package serve

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 document of the server's routes, served at
// /openapi.json; a test holds it to the handlers.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(OpenAPI)
}
