package serve_test

import (
	stdctx "context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/golang-jwt/jwt/v5"
)

// who records the source of every admitted message by request id: what
// an admission policy would see.
var who = struct {
	mu  sync.Mutex
	src map[string]sessions.Source
}{src: map[string]sessions.Source{}}

func sourceSeen(t *testing.T, requestID string) sessions.Source {
	t.Helper()
	who.mu.Lock()
	defer who.mu.Unlock()
	s, ok := who.src[requestID]
	if !ok {
		t.Fatalf("no admission saw request %q", requestID)
	}
	return s
}

func init() {
	plugin.Register("servetest.who", "records the source of admitted messages (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			who.mu.Lock()
			who.src[a.Message.RequestID] = a.Source
			who.mu.Unlock()
			return next.Call(ctx, a)
		})
		return err
	})
}

// TestNamedTokensNamePrincipals: each named token stands for its
// principal and tenant; the single token keeps working as "default"; an
// unknown token is refused.
func TestNamedTokensNamePrincipals(t *testing.T) {
	e := newEnv(t, envOpts{extra: "  - use: servetest.who\n", tokens: []serve.Token{
		{Name: "alice", Secret: "alice-secret-0123456789", Tenant: "acme"},
		{Name: "bob", Secret: "bob-secret-0123456789"},
	}})
	id := e.open(map[string]any{})
	as := func(token, rid string) int {
		r := e.raw("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": rid, "content": "hi"},
			http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}})
		return r.status
	}
	// Alice has a tenant: she drives her tenant's session, not the
	// operator's.
	if st := as("alice-secret-0123456789", "r-alice-foreign"); st != http.StatusNotFound {
		t.Fatalf("alice, on the operator's session: %d", st)
	}
	var made struct{ ID string }
	e.call("POST", "/v1/sessions", map[string]any{}, "Authorization", "Bearer alice-secret-0123456789").json(t, &made)
	id, operators := made.ID, id
	if st := as("alice-secret-0123456789", "r-alice"); st != http.StatusAccepted {
		t.Fatalf("alice: %d", st)
	}
	if st := as("bob-secret-0123456789", "r-bob"); st != http.StatusAccepted {
		t.Fatalf("bob: %d", st)
	}
	e.send(operators, "r-default", "hi")
	if st := as("mallory", "r-mallory"); st != http.StatusUnauthorized {
		t.Fatalf("an unknown token got %d", st)
	}
	for rid, want := range map[string]sessions.Principal{
		"r-alice":   {Kind: "token", ID: "alice", Tenant: "acme"},
		"r-bob":     {Kind: "token", ID: "bob"},
		"r-default": {Kind: "token", ID: serve.DefaultTokenName},
	} {
		s := sourceSeen(t, rid)
		if s.Principal != want || s.Entry != "serve" || s.Kind != sessions.SourceUser {
			t.Errorf("%s: source %+v, want principal %+v through serve", rid, s, want)
		}
	}
}

// issuer is a JWT issuer of the tests: a P-256 key and its JWKS served
// over HTTP, as an identity provider publishes it.
type issuer struct {
	url  string
	key  *ecdsa.PrivateKey
	kid  string
	mu   sync.Mutex
	keys []map[string]string
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{}
	is.rotate(t, "k1")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": is.keys})
	}))
	t.Cleanup(ts.Close)
	is.url = ts.URL + "/.well-known/jwks.json"
	return is
}

// rotate makes a new signing key with id kid and publishes it beside the
// old ones.
func (is *issuer) rotate(t *testing.T, kid string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	pt := pub.Bytes() // 0x04 || X || Y
	b64 := base64.RawURLEncoding.EncodeToString
	is.mu.Lock()
	defer is.mu.Unlock()
	is.key, is.kid = key, kid
	is.keys = append(is.keys, map[string]string{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
		"x": b64(pt[1:33]), "y": b64(pt[33:])})
}

// sign mints a token with claims on top of a valid issuer, audience and
// lifetime.
func (is *issuer) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	all := jwt.MapClaims{"iss": "https://id.example", "aud": "dsh", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		all[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, all)
	is.mu.Lock()
	tok.Header["kid"] = is.kid
	key := is.key
	is.mu.Unlock()
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTMapsClaimsToPrincipal: a JWT signed by a key of the issuer's
// JWKS is let in as its subject, with the tenant claim; a token expired,
// from another issuer, for another audience or signed by a stranger's key
// is refused and told why; a rotated key is picked up without a restart.
func TestJWTMapsClaimsToPrincipal(t *testing.T) {
	is := newIssuer(t)
	e := newEnv(t, envOpts{extra: "  - use: servetest.who\n",
		serve: "  jwt:\n    issuer: https://id.example\n    jwks_url: " + is.url + "\n    audience: dsh\n    tenant_claim: org\n"})
	var made struct{ ID string }
	e.call("POST", "/v1/sessions", map[string]any{}, "Authorization", "Bearer "+is.sign(t, jwt.MapClaims{"sub": "carol", "org": "acme"})).json(t, &made)
	id := made.ID
	post := func(token, rid string) response {
		return e.raw("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": rid, "content": "hi"},
			http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}})
	}
	if r := post(is.sign(t, jwt.MapClaims{"sub": "carol", "org": "acme"}), "r-carol"); r.status != http.StatusAccepted {
		t.Fatalf("a valid JWT: %d %s", r.status, r.body)
	}
	if s := sourceSeen(t, "r-carol"); s.Principal != (sessions.Principal{Kind: "jwt", ID: "carol", Tenant: "acme"}) || s.Entry != "serve" {
		t.Fatalf("source %+v", s)
	}

	stranger := &issuer{}
	stranger.rotate(t, "k1") // same kid, another key
	for name, c := range map[string]struct {
		token string
		why   string
	}{
		"expired":     {is.sign(t, jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix()}), "expired"},
		"issuer":      {is.sign(t, jwt.MapClaims{"sub": "carol", "iss": "https://evil.example"}), "another issuer"},
		"audience":    {is.sign(t, jwt.MapClaims{"sub": "carol", "aud": "other"}), "not meant for this server"},
		"stranger":    {stranger.sign(t, jwt.MapClaims{"sub": "carol"}), "signature"},
		"no subject":  {is.sign(t, jwt.MapClaims{}), `"sub" claim`},
		"no tenant":   {is.sign(t, jwt.MapClaims{"sub": "carol"}), `"org" claim`},
		"bad tenant":  {is.sign(t, jwt.MapClaims{"sub": "carol", "org": "acme\r\nx"}), "non-printable"},
		"not a token": {"a.b.c", "malformed"},
	} {
		r := post(c.token, "r-"+name)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", name, r.status, r.body)
			continue
		}
		if a := r.err(t); a.Code != string(serve.Unauthorized) || !strings.Contains(a.Message, c.why) {
			t.Errorf("%s: %+v, want it to say %q", name, a, c.why)
		}
	}

	// The issuer rotates its key: a token signed with the new one is
	// accepted once the key set is fetched again for its unknown kid.
	is.rotate(t, "k2")
	if r := post(is.sign(t, jwt.MapClaims{"sub": "dave", "org": "acme"}), "r-dave"); r.status != http.StatusAccepted {
		t.Fatalf("a token of the rotated key: %d %s", r.status, r.body)
	}
	if s := sourceSeen(t, "r-dave"); s.Principal != (sessions.Principal{Kind: "jwt", ID: "dave", Tenant: "acme"}) {
		t.Fatalf("source %+v", s)
	}
}
