package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/host/config"
)

// authorize lets a request through only with the bearer token. The token
// and the header are hashed before the constant-time compare, so neither
// their contents nor their lengths show in the time it takes.
func (s *Server) authorize(next http.Handler) http.Handler {
	if s.o.NoAuth {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, given, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		// The scheme is case-insensitive (RFC 9110 §11.1); the token is not.
		ok = ok && strings.EqualFold(scheme, "Bearer")
		sum := sha256.Sum256([]byte(strings.TrimSpace(given)))
		if !ok || subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh"`)
			why := "no bearer token"
			if ok {
				why = "the bearer token is not this server's"
			}
			writeJSON(w, http.StatusUnauthorized, fail(0, Unauthorized,
				"%s; send the header Authorization: Bearer <token>, with the token dsh serve was started with (serve.token_env, default $DSH_SERVE_TOKEN, or serve.token_file)", why))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cors answers for the origins serve.cors_origins lists and for no other:
// a listed origin gets the Access-Control headers, and its preflight is
// answered here; a preflight from any other origin is refused. Requests
// without an Origin (curl, the same-origin page's GETs) pass untouched.
// It reports whether the request goes on.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	allowed := slices.Contains(s.cfg.CORSOrigins, origin)
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if allowed {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate, Location")
	}
	if !preflight {
		// A cross-origin write needs no preflight when its body is
		// text/plain: refuse it here, or any site the user visits could
		// drive a server that runs without a token.
		if !allowed && !safeMethod(r.Method) && !sameOrigin(origin, r.Host) {
			writeJSON(w, http.StatusForbidden, fail(0, CORSRefused,
				"origin %q may not call this server from a browser; list it under serve.cors_origins to allow it", origin))
			return false
		}
		return true
	}
	if !allowed {
		writeJSON(w, http.StatusForbidden, fail(0, CORSRefused,
			"origin %q may not call this server from a browser; list it under serve.cors_origins to allow it", origin))
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return false
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether origin names the host the request was sent
// to, as the server's own page does.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, host)
}

// loopbackHost reports whether a request's Host names this machine only.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return config.IsLoopback(strings.Trim(host, "[]"))
}
