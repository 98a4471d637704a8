package sign_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/session/sign"
	"github.com/dsh-go/dsh/services/session"
)

func TestKeysReadFromAFileOrTheEnvironmentInEveryForm(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(priv)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
	file := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(file, pemKey, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DSH_TEST_SIGN_SEED", base64.StdEncoding.EncodeToString(priv.Seed()))
	t.Setenv("DSH_TEST_SIGN_FULL", base64.StdEncoding.EncodeToString(priv))
	for _, cfg := range []sign.Config{{KeyFile: file}, {KeyEnv: "DSH_TEST_SIGN_SEED"}, {KeyEnv: "DSH_TEST_SIGN_FULL"}} {
		s, err := cfg.Signer()
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if s.ID() != session.KeyID(pub) {
			t.Fatalf("%+v: key id %s, want %s", cfg, s.ID(), session.KeyID(pub))
		}
	}
	px, _ := x509.MarshalPKIXPublicKey(pub)
	for _, text := range [][]byte{pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: px}), []byte(base64.StdEncoding.EncodeToString(pub) + "\n")} {
		got, err := sign.ParsePublicKey(text)
		if err != nil || !got.Equal(pub) {
			t.Fatalf("public key %q: %v", text, err)
		}
	}
}

func TestBadKeysAreRefusedWithoutShowingThem(t *testing.T) {
	if err := (sign.Config{}).Validate(); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("no key: %v", err)
	}
	if err := (sign.Config{KeyFile: "a", KeyEnv: "B"}).Validate(); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("two keys: %v", err)
	}
	secret := base64.StdEncoding.EncodeToString([]byte("twenty-one bytes long"))
	t.Setenv("DSH_TEST_SIGN_BAD", secret)
	_, err := sign.Config{KeyEnv: "DSH_TEST_SIGN_BAD"}.Signer()
	if !errs.HasCode(err, errs.InvalidArgument) || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "DSH_TEST_SIGN_BAD") {
		t.Fatalf("a short key: %v", err)
	}
	if _, err := (sign.Config{KeyEnv: "DSH_TEST_SIGN_UNSET"}).Signer(); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("an unset variable: %v", err)
	}
	if _, err := (sign.Config{KeyFile: filepath.Join(t.TempDir(), "none")}).Signer(); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("a missing file: %v", err)
	}
}
