// Package sign is the session.sign plugin: it has the session log sign
// every decision record with an ed25519 key, so an auditor holding the
// public key can check a session's decisions offline (dsh sessions
// verify). The key comes from a file or an environment variable; it is
// never logged, and what the plugin shows of it is its key id.
//
// Keys are read in the forms openssl and ssh-keygen-free tooling write: a
// PEM "PRIVATE KEY" block (PKCS #8, `openssl genpkey -algorithm ed25519`)
// or the base64 of the 32-byte seed or the 64-byte private key; public
// keys as a PEM "PUBLIC KEY" block (`openssl pkey -pubout`) or the base64
// of the 32 bytes.
package sign

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/session"
)

// Config is the plugin's configuration: exactly one of KeyFile and KeyEnv.
type Config struct {
	// KeyFile is the path of the private key.
	KeyFile string `koanf:"key_file" json:"key_file,omitempty"`
	// KeyEnv names the environment variable that holds the private key.
	KeyEnv string `koanf:"key_env" json:"key_env,omitempty"`
}

// Validate checks that the config names one place for the key.
func (c Config) Validate() error {
	switch {
	case c.KeyFile == "" && c.KeyEnv == "":
		return errs.New(errs.InvalidArgument, "session.sign: set key_file (a path) or key_env (an environment variable) to the ed25519 private key that signs decision records")
	case c.KeyFile != "" && c.KeyEnv != "":
		return errs.New(errs.InvalidArgument, "session.sign: set key_file or key_env, not both")
	}
	return nil
}

// Signer reads the configured key and returns a signer for it.
func (c Config) Signer() (*session.Signer, error) {
	var text []byte
	where := ""
	if c.KeyFile != "" {
		where = fmt.Sprintf("key_file %q", c.KeyFile)
		b, err := os.ReadFile(c.KeyFile)
		if err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("session.sign: the %s cannot be read; check the path and its permissions", where))
		}
		text = b
	} else {
		where = fmt.Sprintf("environment variable %s (key_env)", c.KeyEnv)
		v, ok := os.LookupEnv(c.KeyEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("session.sign: the %s is not set; export the private key in it", where))
		}
		text = []byte(v)
	}
	key, err := ParsePrivateKey(text)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("session.sign: the %s does not hold an ed25519 private key", where))
	}
	return session.NewSigner(key)
}

// Plugin is session.sign.
var Plugin = plugin.Register("session.sign", "signs the sessions' decision records with an ed25519 key (dsh sessions verify checks them)", func(ctx *dshctx.Context, cfg Config) error {
	signer, err := cfg.Signer()
	if err != nil {
		return err
	}
	st, err := session.Key.Get(ctx)
	if err != nil {
		return err
	}
	if err := st.SetSigner(ctx, signer); err != nil {
		return err
	}
	ctx.Logger().Debug("decision records are signed", "key_id", signer.ID())
	return nil
}, session.Key)

// ParsePrivateKey reads an ed25519 private key: a PEM PRIVATE KEY block
// (PKCS #8), or the base64 of its 32-byte seed or 64-byte key. Errors
// never quote the text.
func ParsePrivateKey(text []byte) (ed25519.PrivateKey, error) {
	if block, _ := pem.Decode(text); block != nil {
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("its PEM block %q is not a PKCS #8 private key", block.Type)
		}
		key, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("its PEM block holds a %T, not an ed25519 key", k)
		}
		return key, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		return nil, fmt.Errorf("it is neither PEM nor base64")
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(b), nil
	}
	return nil, fmt.Errorf("its base64 holds %d bytes; an ed25519 seed has %d, a private key %d", len(b), ed25519.SeedSize, ed25519.PrivateKeySize)
}

// ParsePublicKey reads an ed25519 public key: a PEM PUBLIC KEY block
// (PKIX), or the base64 of its 32 bytes.
func ParsePublicKey(text []byte) (ed25519.PublicKey, error) {
	if block, _ := pem.Decode(text); block != nil {
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("its PEM block %q is not a PKIX public key", block.Type)
		}
		key, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("its PEM block holds a %T, not an ed25519 key", k)
		}
		return key, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		return nil, fmt.Errorf("it is neither PEM nor base64")
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("its base64 holds %d bytes; an ed25519 public key has %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
