package serve_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve"
)

// Every /v1 route but health wants the token; the page, the document and
// health do not. The token is never in a response or a log line.
func TestBearerToken(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.open(nil)
	e.send(id, "r1", "hello")
	e.waitEvents(id, "turn end", turnsEnded(1))
	for _, hdr := range []http.Header{
		{},
		{"Authorization": {"Bearer " + e.token + "x"}},
		{"Authorization": {"Bearer " + e.token[:len(e.token)-1]}},
		{"Authorization": {"Basic " + e.token}},
		{"Authorization": {e.token}},
	} {
		for _, path := range []string{"/v1/sessions", "/v1/agents", "/v1/sessions/" + id, "/v1/sessions/" + id + "/stream", "/v1/sessions/nope"} {
			r := e.raw("GET", path, nil, hdr)
			if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Bearer realm="dsh"` || r.err(t).Code != "SERVE_UNAUTHORIZED" {
				t.Fatalf("%s with %v: %d %v %s", path, hdr, r.status, r.header, r.body)
			}
		}
		r := e.raw("POST", "/v1/sessions/"+id+"/messages", `{"content":"sneaky"}`, hdr)
		if r.status != http.StatusUnauthorized {
			t.Fatalf("post without the token: %d", r.status)
		}
	}
	for _, path := range []string{"/v1/health", "/openapi.json", "/"} {
		if r := e.raw("GET", path, nil, http.Header{}); r.status != 200 {
			t.Fatalf("%s without a token: %d %s", path, r.status, r.body)
		}
	}
	if n := len(e.events(id)); n == 0 {
		t.Fatal("no history")
	}
	for _, ev := range e.events(id) {
		if ev.Message != nil && ev.Message.Content == "sneaky" {
			t.Fatal("a message without the token was delivered")
		}
	}
	e.call("POST", "/v1/sessions/"+id+"/close", nil)
	e.close()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, body := range e.seen {
		if strings.Contains(body, e.token) {
			t.Fatalf("a response holds the token: %s", body)
		}
	}
	log := e.log.String()
	if !strings.Contains(log, "path=/v1/sessions") {
		t.Fatalf("the requests were not logged: %s", log)
	}
	if strings.Contains(log, e.token) || strings.Contains(log, "Bearer") {
		t.Fatalf("the log holds the token:\n%s", log)
	}
}

// CORS is off unless serve.cors_origins lists the origin; a listed origin's
// preflight is answered, any other is refused.
func TestCORS(t *testing.T) {
	for _, listed := range []bool{false, true} {
		o := envOpts{}
		if listed {
			o.serve = "  cors_origins: [\"https://app.example\"]\n"
		}
		e := newEnv(t, o)
		pre := e.raw("OPTIONS", "/v1/sessions", nil, http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"},
			"Access-Control-Request-Headers": {"authorization, content-type"}})
		other := e.raw("OPTIONS", "/v1/sessions", nil, http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"POST"}})
		get := e.call("GET", "/v1/sessions", nil, "Origin", "https://app.example")
		if other.status != http.StatusForbidden || other.err(t).Code != "SERVE_CORS_REFUSED" || other.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("unlisted preflight: %d %v %s", other.status, other.header, other.body)
		}
		if !listed {
			if pre.status != http.StatusForbidden || get.header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("CORS without cors_origins: preflight %d, GET header %v", pre.status, get.header)
			}
			continue
		}
		if pre.status != http.StatusNoContent || pre.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "POST") {
			t.Fatalf("listed preflight: %d %v", pre.status, pre.header)
		}
		if get.status != 200 || get.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Fatalf("listed GET: %d %v", get.status, get.header)
		}
		// CORS is no way around the token.
		if r := e.raw("GET", "/v1/sessions", nil, http.Header{"Origin": {"https://app.example"}}); r.status != http.StatusUnauthorized {
			t.Fatalf("listed origin without the token: %d", r.status)
		}
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	secret := "s3cr3t-token-value"
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	cases := []struct {
		name string
		cfg  config.ServeConfig
		vars map[string]string
		want string
		says string
	}{
		{"default variable", config.ServeConfig{}, map[string]string{"DSH_SERVE_TOKEN": " " + secret + "\n"}, secret, ""},
		{"named variable", config.ServeConfig{TokenEnv: "MY_TOKEN"}, map[string]string{"MY_TOKEN": secret, "DSH_SERVE_TOKEN": "other"}, secret, ""},
		{"unset", config.ServeConfig{}, nil, "", "$DSH_SERVE_TOKEN is unset or empty"},
		{"blank", config.ServeConfig{TokenEnv: "MY_TOKEN"}, map[string]string{"MY_TOKEN": "  "}, "", "$MY_TOKEN is unset or empty"},
		{"file", config.ServeConfig{TokenFile: write("ok", secret+"\n", 0o600)}, nil, secret, ""},
		{"file readable by others", config.ServeConfig{TokenFile: write("open", secret, 0o644)}, nil, "", "chmod 600"},
		{"file readable by group", config.ServeConfig{TokenFile: write("group", secret, 0o640)}, nil, "", "group or others"},
		{"empty file", config.ServeConfig{TokenFile: write("empty", "\n", 0o600)}, nil, "", "is empty"},
		{"missing file", config.ServeConfig{TokenFile: filepath.Join(dir, "none")}, nil, "", "cannot be read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := serve.LoadToken(c.cfg, env(c.vars))
			if c.says == "" {
				if err != nil || got != c.want {
					t.Fatalf("token %q, %v", got, err)
				}
				return
			}
			if err == nil || !errs.HasCode(err, serve.NoToken) || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), secret) {
				t.Fatalf("error %v, want NoToken saying %q (and never the token)", err, c.says)
			}
		})
	}
}

// A server without a token refuses to be built without saying so, and to
// serve anywhere but loopback.
func TestNoAuthOnlyOnLoopback(t *testing.T) {
	e := newEnv(t, envOpts{noAuth: true})
	if r := e.raw("GET", "/v1/sessions", nil, http.Header{}); r.status != 200 {
		t.Fatalf("no_auth: %d %s", r.status, r.body)
	}
	if _, err := serve.New(serve.Options{Sessions: e.h.Sessions(), Config: e.h.Config()}); !errs.HasCode(err, serve.NoToken) {
		t.Fatalf("New without a token: %v", err)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ip, _, _ := net.ParseCIDR(a.String())
		if ip == nil || ip.IsLoopback() || ip.To4() == nil {
			continue
		}
		l, err := net.Listen("tcp", ip.String()+":0")
		if err != nil {
			continue
		}
		err = e.srv.Serve(l)
		l.Close()
		if !errs.HasCode(err, serve.NoToken) || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("no_auth served on %s: %v", ip, err)
		}
		return
	}
	t.Log("no address but loopback here: only the loopback half ran")
}

// A page on another origin can send a "simple" cross-origin POST (a
// text/plain body needs no preflight); without a token to stop it, it would
// open a session and prompt its agent from any site the user visits. Such
// a write is refused; the same origin and a listed one pass.
func TestCrossOriginWriteRefused(t *testing.T) {
	e := newEnv(t, envOpts{noAuth: true, serve: "  cors_origins: [\"https://app.example\"]\n"})
	evil := http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain;charset=UTF-8"}}
	r := e.raw("POST", "/v1/sessions", `{"session_id":"pwned"}`, evil)
	if r.status != http.StatusForbidden || r.err(t).Code != "SERVE_CORS_REFUSED" {
		t.Fatalf("cross-origin POST: %d %s", r.status, r.body)
	}
	if got := e.raw("GET", "/v1/sessions/pwned", nil, http.Header{}); got.status != http.StatusNotFound {
		t.Fatalf("a cross-origin POST opened a session: %d %s", got.status, got.body)
	}
	same := http.Header{"Origin": {e.ts.URL}, "Content-Type": {"application/json"}}
	if r := e.raw("POST", "/v1/sessions", `{"session_id":"mine"}`, same); r.status != http.StatusCreated {
		t.Fatalf("same-origin POST: %d %s", r.status, r.body)
	}
	if r := e.raw("POST", "/v1/sessions/mine/messages", `{"content":"hi"}`, evil); r.status != http.StatusForbidden {
		t.Fatalf("cross-origin message: %d %s", r.status, r.body)
	}
	listed := http.Header{"Origin": {"https://app.example"}, "Content-Type": {"application/json"}}
	if r := e.raw("POST", "/v1/sessions/mine/close", nil, listed); r.status != http.StatusOK {
		t.Fatalf("listed-origin POST: %d %s", r.status, r.body)
	}
}

// Without a token, the loopback address is the only guard, and DNS
// rebinding walks past it: a site's name re-pointed at 127.0.0.1 makes the
// browser send the site's own (same-origin) requests here, with the site's
// name as Host. A server without a token answers only loopback names.
func TestNoAuthRefusesForeignHost(t *testing.T) {
	e := newEnv(t, envOpts{noAuth: true})
	do := func(method, host, body string) response {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, e.ts.URL+"/v1/sessions", rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		r := response{status: resp.StatusCode, header: resp.Header, body: b}
		e.doc.check(t, method, "/v1/sessions", r)
		return r
	}
	for _, method := range []string{"GET", "POST"} {
		r := do(method, "rebound.example:"+e.ts.URL[strings.LastIndex(e.ts.URL, ":")+1:], "{}")
		if r.status != http.StatusForbidden || r.err(t).Code != "SERVE_HOST_REFUSED" {
			t.Fatalf("%s with a foreign Host: %d %s", method, r.status, r.body)
		}
	}
	for _, host := range []string{"localhost", "127.0.0.1:1", "[::1]:80", e.ts.Listener.Addr().String()} {
		if r := do("GET", host, ""); r.status != http.StatusOK {
			t.Fatalf("GET with Host %s: %d %s", host, r.status, r.body)
		}
	}
}

// The auth scheme is case-insensitive (RFC 9110 §11.1): "bearer" is the
// same scheme as "Bearer"; the token itself is compared exactly.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		if r := e.raw("GET", "/v1/sessions", nil, http.Header{"Authorization": {scheme + " " + e.token}}); r.status != http.StatusOK {
			t.Fatalf("%s <token>: %d %s", scheme, r.status, r.body)
		}
	}
	if r := e.raw("GET", "/v1/sessions", nil, http.Header{"Authorization": {"bearer " + strings.ToUpper(e.token)}}); r.status != http.StatusUnauthorized {
		t.Fatalf("a token in the wrong case: %d", r.status)
	}
}
