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
		fi, err := os.Stat(c.TokenFile)
		if err != nil {
			return "", errs.Wrap(NoToken, err, fmt.Sprintf("serve.token_file %s cannot be read; create it with the token (e.g. openssl rand -hex 32 > %s; chmod 600 %s)", c.TokenFile, c.TokenFile, c.TokenFile))
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return "", errs.New(NoToken, fmt.Sprintf("serve.token_file %s is readable or writable by group or others (mode %04o); run chmod 600 %s so only its owner can read the token", c.TokenFile, perm, c.TokenFile))
		}
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return "", errs.Wrap(NoToken, err, fmt.Sprintf("serve.token_file %s cannot be read", c.TokenFile))
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", errs.New(NoToken, fmt.Sprintf("serve.token_file %s is empty; write the token into it (e.g. openssl rand -hex 32 > %s)", c.TokenFile, c.TokenFile))
		}
		return tok, nil
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
