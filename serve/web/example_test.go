package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/dsh-go/dsh/serve/web"
)

// The page is mounted at "/" and "/assets/"; the API's routes sit beside
// it on the same mux.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", web.Handler())
	mux.Handle("GET /assets/", web.Handler())

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/assets/app.js", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/javascript; charset=utf-8
}
