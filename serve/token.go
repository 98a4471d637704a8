package serve

import (
	"fmt"
	"os"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
)

// LoadToken reads the bearer token the serve: key points at: the file
// serve.token_file (trimmed; it must not be readable by group or others),
// else the variable serve.token_env (default DSH_SERVE_TOKEN), read with
// getenv. An empty token is refused: it would let anyone in. The error
// says what to set; it never contains the token.
func LoadToken(c config.ServeConfig, getenv func(string) string) (string, error) {
	if c.TokenFile != "" {
		return readTokenFile("serve.token_file", c.TokenFile)
	}
	name := c.TokenEnv
	if name == "" {
		name = config.DefaultTokenEnv
	}
	tok := strings.TrimSpace(getenv(name))
	if tok == "" {
		return "", errs.New(NoToken, fmt.Sprintf("no bearer token: $%s is unset or empty; set it to a secret (e.g. export %s=$(openssl rand -hex 32)), or point serve.token_file at a file holding one; serve.no_auth: true serves without a token on a loopback address only", name, name))
	}
	return tok, nil
}

// LoadTokens reads every bearer token the serve: key names: the named
// ones of serve.tokens, and the single token of token_env/token_file
// (named DefaultTokenName) when one of those is set or when nothing else
// would let a caller in (no named token, no JWT issuer). A token that
// cannot be read, is empty, or is the same secret as another is an error
// naming the key to fix; the error never contains a token.
func LoadTokens(c config.ServeConfig, getenv func(string) string) ([]Token, error) {
	var out []Token
	if c.TokenFile != "" || c.TokenEnv != "" || (len(c.Tokens) == 0 && !c.JWT.Enabled()) {
		tok, err := LoadToken(c, getenv)
		if err != nil {
			return nil, err
		}
		out = append(out, Token{Name: DefaultTokenName, Secret: tok})
	}
	for i, t := range c.Tokens {
		at := fmt.Sprintf("serve.tokens[%d] (%s)", i, t.Name)
		var tok string
		if t.File != "" {
			var err error
			if tok, err = readTokenFile(at+".file", t.File); err != nil {
				return nil, err
			}
		} else if tok = strings.TrimSpace(getenv(t.Env)); tok == "" {
			return nil, errs.New(NoToken, fmt.Sprintf("%s: $%s is unset or empty; set it to the token's secret (e.g. export %s=$(openssl rand -hex 32))", at, t.Env, t.Env))
		}
		for _, o := range out {
			if o.Secret == tok {
				return nil, errs.New(NoToken, fmt.Sprintf("%s holds the same secret as token %q; give every principal its own token, or a request could not say who it is", at, o.Name))
			}
		}
		out = append(out, Token{Name: t.Name, Secret: tok, Tenant: t.Tenant})
	}
	return out, nil
}

// readTokenFile reads a token file that only its owner may read; key is
// the config key that names it, for the error.
func readTokenFile(key, file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", errs.Wrap(NoToken, err, fmt.Sprintf("%s %s cannot be read; create it with the token (e.g. openssl rand -hex 32 > %s; chmod 600 %s)", key, file, file, file))
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", errs.New(NoToken, fmt.Sprintf("%s %s is readable or writable by group or others (mode %04o); run chmod 600 %s so only its owner can read the token", key, file, perm, file))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", errs.Wrap(NoToken, err, fmt.Sprintf("%s %s cannot be read", key, file))
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errs.New(NoToken, fmt.Sprintf("%s %s is empty; write the token into it (e.g. openssl rand -hex 32 > %s)", key, file, file))
	}
	return tok, nil
}
