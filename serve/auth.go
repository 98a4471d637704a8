package serve

import (
	stdctx "context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/sessions"
)

// Token is one bearer token the server accepts, and the principal it
// stands for.
type Token struct {
	// Name is the principal's id (kind "token").
	Name string
	// Secret is the bearer token itself.
	Secret string
	// Tenant groups the principal with others, for policies and quotas.
	Tenant string
}

// DefaultTokenName is the principal of the single token of
// serve.token_env / serve.token_file (and of Options.Token).
const DefaultTokenName = "default"

// tokenHash is a Token as the server keeps it: only the secret's digest.
type tokenHash struct {
	name, tenant string
	sum          [sha256.Size]byte
}

// principalKey carries the caller's principal in a request's context.
type principalKey struct{}

// principalOf is who sent r, as authorize established it (zero without
// auth).
func principalOf(r *http.Request) sessions.Principal {
	p, _ := r.Context().Value(principalKey{}).(sessions.Principal)
	return p
}

// sourceOf is the source of what r delivers: a user through serve, named
// by the request's principal.
func sourceOf(r *http.Request) sessions.Source {
	return sessions.Source{Kind: sessions.SourceUser, RPCID: "http", Entry: "serve", Principal: principalOf(r)}
}

// authorize lets a request through only with a bearer token the server
// knows — one of its named tokens, or a JWT its issuer signed — and puts
// the principal it stands for in the request's context. The named tokens
// and the header are hashed before the constant-time compares, and every
// token is compared whichever matches, so neither their contents, their
// lengths nor which one matched show in the time it takes.
func (s *Server) authorize(next http.Handler) http.Handler {
	if s.o.NoAuth {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, given, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		// The scheme is case-insensitive (RFC 9110 §11.1); the token is not.
		ok = ok && strings.EqualFold(scheme, "Bearer")
		given = strings.TrimSpace(given)
		sum := sha256.Sum256([]byte(given))
		match := -1
		for i := range s.tokens {
			if subtle.ConstantTimeCompare(sum[:], s.tokens[i].sum[:]) == 1 {
				match = i
			}
		}
		var who sessions.Principal
		why := "no bearer token"
		switch {
		case !ok:
		case match >= 0:
			who = sessions.Principal{Kind: "token", ID: s.tokens[match].name, Tenant: s.tokens[match].tenant}
		case s.jwt != nil && looksLikeJWT(given):
			var err error
			if who, err = s.jwt.verify(r.Context(), given); err != nil {
				why = "the bearer token is a JWT that does not verify: " + err.Error()
			}
		default:
			why = "the bearer token is not this server's"
		}
		if who.IsZero() {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh"`)
			writeJSON(w, http.StatusUnauthorized, fail(0, Unauthorized,
				"%s; send the header Authorization: Bearer <token>, with a token dsh serve knows (serve.token_env, default $DSH_SERVE_TOKEN, serve.token_file or serve.tokens) or a JWT from the issuer of serve.jwt", why))
			return
		}
		next.ServeHTTP(w, r.WithContext(stdctx.WithValue(r.Context(), principalKey{}, who)))
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
