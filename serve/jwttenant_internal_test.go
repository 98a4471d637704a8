package serve

import (
	stdctx "context"
	"log/slog"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
)

// serve.jwt.tenant is every tokens' tenant that lacks the claim: it is
// checked as a static token's tenant is, before any key is fetched.
func TestAJWTTenantThatCannotBeStoredIsRefused(t *testing.T) {
	for _, bad := range []string{"a\tb", "acme\r\nx", strings.Repeat("x", 200)} {
		_, err := newJWTVerifier(stdctx.Background(), config.JWTConfig{Issuer: "https://id.example", JWKSURL: "http://127.0.0.1:1/jwks", Tenant: bad},
			nil, slog.New(slog.DiscardHandler))
		if !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), "serve.jwt.tenant") {
			t.Errorf("tenant %q: %v", bad, err)
		}
	}
}
