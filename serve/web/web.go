// Package web is the page dsh serve shows at "/": a small client of the
// serve HTTP API (session list, chat with streamed answer and reasoning,
// tool calls, approvals, queue, steer, cancel, attachments) written as plain
// HTML, CSS and JavaScript modules.
//
// The files are embedded in the binary, so building dsh needs no Node step
// and the page works offline: it loads nothing from another origin. The
// Content-Security-Policy forbids inline script and every origin but the
// server's own, so text a model writes can never run as code even if a
// rendering bug let it into the markup.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
)

//go:embed static
var static embed.FS

// Policy is the Content-Security-Policy of every response: scripts, styles
// and connections only from the server itself, no inline script or style,
// no plugins, no framing, no form posts. Images may also be blob: URLs:
// the page fetches attachments with the bearer token (an <img src> could
// not send it) and shows the bytes it holds.
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' blob:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// The codes of the handler's errors: the same as dsh serve's own, so a
// client sees one code for one failure whoever answered.
const (
	NotFound         errs.Code = "SERVE_NOT_FOUND"
	MethodNotAllowed errs.Code = "SERVE_METHOD_NOT_ALLOWED"
)

// refuse answers with the error body of the serve API.
func refuse(w http.ResponseWriter, status int, code errs.Code, msg string) {
	body, _ := json.Marshal(struct {
		Code    errs.Code `json:"code"`
		Message string    `json:"message"`
	}{code, msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// file is one embedded file, ready to serve.
type file struct {
	body        []byte
	etag        string
	contentType string
}

// contentTypes are the types of the files the page has, set explicitly so
// that they do not depend on the machine's MIME tables (a .js served as
// text/plain would not run as a module).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// files maps a URL path to its file; "/" is index.html.
var files = sync.OnceValue(func() map[string]file {
	out := map[string]file{}
	err := fs.WalkDir(static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		urlPath := strings.TrimPrefix(name, "static")
		if urlPath == "/index.html" {
			urlPath = "/"
		}
		out[urlPath] = file{
			body:        body,
			etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`,
			contentType: contentTypes[path.Ext(name)],
		}
		return nil
	})
	if err == nil {
		// Generated from chroma's styles rather than committed, so that
		// it names the classes the linked chroma writes.
		css := CodeCSS()
		sum := sha256.Sum256(css)
		out["/assets/code.css"] = file{body: css, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`, contentType: contentTypes[".css"]}
	}
	if err != nil {
		// The files are compiled in: a read cannot fail at run time.
		panic("web: reading the embedded page: " + err.Error())
	}
	return out
})

// Handler serves the page at "/" and its files under "/assets/". Every
// response carries the Content-Security-Policy; files carry an ETag and
// "Cache-Control: no-cache", so a browser revalidates (a 304 costs one
// round trip) and never runs a stale script after dsh is upgraded.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", Policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed, MethodNotAllowed, r.URL.Path+" does not take "+r.Method+"; it takes GET, HEAD")
		return
	}
	f, ok := files()[r.URL.Path]
	if !ok {
		refuse(w, http.StatusNotFound, NotFound, "the page has no file "+r.URL.Path+"; the page is at /")
		return
	}
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
