package serve

import (
	stdctx "context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// Default settings of serve.jwt.
var (
	defaultJWTAlgorithms = []string{"RS256", "ES256", "EdDSA"}
	defaultJWTLeeway     = 30 * time.Second
	defaultJWKSRefresh   = time.Hour
)

// jwtVerifier checks bearer tokens that are JWTs against serve.jwt: the
// signature by a key of the issuer's JWKS (fetched and refreshed by
// keyfunc, which also refetches, rate limited, when a token names a key id
// it has not seen: a rotated key works without a restart), the issuer,
// the audience, the signing algorithm and the time claims. The principal
// is the configured subject claim; the tenant a claim or a fixed name.
type jwtVerifier struct {
	cfg    config.JWTConfig
	keys   keyfunc.Keyfunc
	parser *jwt.Parser
}

func newJWTVerifier(ctx stdctx.Context, c config.JWTConfig, client *http.Client, log *slog.Logger) (*jwtVerifier, error) {
	if c.Issuer == "" || c.JWKSURL == "" {
		return nil, errs.New(errs.InvalidArgument, "serve.jwt: set both issuer (the iss claim tokens carry) and jwks_url (where the issuer publishes its keys)")
	}
	if c.Tenant != "" {
		// Checked as a token's tenant is: it is stored with every session
		// its callers open, and a tab or newline would not read back.
		if err := session.CheckTenant(c.Tenant); err != nil {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("serve.jwt.tenant %q cannot be used: %v; name it with at most %d printable characters", c.Tenant, err, session.MaxTenantLen))
		}
	}
	if c.SubjectClaim == "" {
		c.SubjectClaim = "sub"
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = defaultJWTAlgorithms
	}
	if c.Leeway == 0 {
		c.Leeway = defaultJWTLeeway
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = defaultJWKSRefresh
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	url := c.JWKSURL
	keys, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		Client:          client,
		HTTPTimeout:     10 * time.Second,
		RefreshInterval: c.RefreshInterval,
		// A key id not in the set refetches it at most once a minute:
		// rotation is picked up, and forged kids cannot flood the issuer.
		RefreshUnknownKID: rate.NewLimiter(rate.Every(time.Minute), 1),
		RefreshErrorHandlerFunc: func(u string) func(stdctx.Context, error) {
			return func(_ stdctx.Context, err error) {
				log.Warn("serve.jwt: fetching the key set failed; tokens are checked against the keys fetched before", "url", u, "error", err)
			}
		},
	})
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("serve.jwt: the key set at %s cannot be used", url))
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(c.Algorithms),
		jwt.WithIssuer(c.Issuer),
		jwt.WithLeeway(c.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	} else {
		// Allowed, for issuers that mint no aud; but then a token the
		// issuer made for any other application is let in too.
		log.Warn("serve.jwt.audience is not set: any token of the issuer is let in, whatever application it was made for; set audience to the aud your identity provider gives dsh's tokens", "issuer", c.Issuer)
	}
	return &jwtVerifier{cfg: c, keys: keys, parser: jwt.NewParser(opts...)}, nil
}

// looksLikeJWT reports whether a bearer token has a JWT's three parts;
// anything else is not worth parsing.
func looksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// verify returns the principal a JWT stands for, or why it does not.
func (v *jwtVerifier) verify(ctx stdctx.Context, tok string) (sessions.Principal, error) {
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(tok, claims, v.keys.KeyfuncCtx(ctx)); err != nil {
		return sessions.Principal{}, errors.New(jwtReason(err))
	}
	sub, _ := claims[v.cfg.SubjectClaim].(string)
	if sub == "" {
		return sessions.Principal{}, fmt.Errorf("it has no %q claim (a string) to name the principal (serve.jwt.subject_claim)", v.cfg.SubjectClaim)
	}
	p := sessions.Principal{Kind: "jwt", ID: sub, Tenant: v.cfg.Tenant}
	if v.cfg.TenantClaim != "" {
		t, _ := claims[v.cfg.TenantClaim].(string)
		switch {
		case t != "":
			if err := session.CheckTenant(t); err != nil {
				return sessions.Principal{}, fmt.Errorf("its %q claim cannot name a tenant: %v", v.cfg.TenantClaim, err)
			}
			p.Tenant = t
		case v.cfg.Tenant == "":
			// Letting it in without a tenant would make it an operator,
			// who sees every tenant's sessions.
			return sessions.Principal{}, fmt.Errorf("it has no %q claim (a string) to name its tenant (serve.jwt.tenant_claim), and serve.jwt.tenant gives none", v.cfg.TenantClaim)
		}
	}
	return p, nil
}

// missingClaim names the claim whose absence failed a token: exp always,
// iss always, aud when serve.jwt.audience is set. The library says which
// only in its message.
func missingClaim(err error) string {
	for _, c := range []string{"aud", "iss", "exp"} {
		if strings.Contains(err.Error(), c+" claim is required") {
			return c
		}
	}
	return "exp, iss or aud"
}

// jwtReason words a verification failure for the caller: what is wrong
// with the token, never the key material.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return "it has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "it is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "it was issued by another issuer than serve.jwt.issuer"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "it is not meant for this server (serve.jwt.audience)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "it lacks a required claim (" + missingClaim(err) + ")"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, keyfunc.ErrKeyfunc):
		return "its signature is not by a key of the issuer's key set"
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return "its signature cannot be checked: " + err.Error()
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "it is malformed"
	}
	return err.Error()
}
