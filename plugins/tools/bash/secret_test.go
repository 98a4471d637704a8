//go:build linux

package bash_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/protect"
)

// TestSecretPathsAreHidden: serve's token and a session store, owner-only
// files of dsh's user inside the workspace, are protected as Secret; the
// command sees the folder empty and the file empty, and cannot change
// either. As root the idmapped workspace would otherwise let it read them
// as root; as an ordinary user it is that user.
func TestSecretPathsAreHidden(t *testing.T) {
	a := start(t, isolated(t, nil))
	const secret = "tok-5e3c7e7-not-a-real-token"
	serve := filepath.Join(a.ws, ".dsh/serve")
	if err := os.MkdirAll(serve, 0o700); err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(serve, "token")
	sessions := filepath.Join(a.ws, "sessions.db")
	for _, f := range []string{token, sessions} {
		if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := protect.Key.Get(a.root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Add(protect.Entry{Path: serve, What: "serve's state", Secret: true})()
	defer l.Add(protect.Entry{Path: sessions, What: "a session store", Secret: true})()
	r := a.run(t.Context(), `cat .dsh/serve/token sessions.db; echo; ls -A .dsh/serve; grep -r tok- . 2>/dev/null
echo x > sessions.db && echo SESSIONS-WRITTEN
touch .dsh/serve/new && echo SERVE-WRITTEN
echo DONE`)
	if strings.Contains(r.Content, secret) || strings.Contains(r.Content, "\ntoken\n") {
		t.Errorf("the command read a secret:\n%s", r.Content)
	}
	for _, bad := range []string{"SESSIONS-WRITTEN", "SERVE-WRITTEN"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s:\n%s", bad, r.Content)
		}
	}
	if !strings.Contains(r.Content, "DONE") {
		t.Fatalf("the command did not run:\n%s", r.Content)
	}
	for _, f := range []string{token, sessions} {
		if b, _ := os.ReadFile(f); string(b) != secret+"\n" {
			t.Errorf("%s changed on disk: %q", f, b)
		}
	}
}
