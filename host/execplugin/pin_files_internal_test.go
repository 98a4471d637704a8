package execplugin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/asnobody"
)

// asNobodyPin names, in the child run as nobody, the pinned file to check.
const asNobodyPin = "DSH_EXECPLUGIN_TEST_NOBODY_PIN"

// TestPinsFailClosedOnAFileThatCannotBeRead: root reads a pinned file
// whatever its mode, so the check is its content's. An ordinary user may
// be unable to read it (mode 0200): the pin then refuses, naming the file
// and why, rather than passing a file it could not check. As root the
// test re-runs itself as uid 65534 with setpriv.
func TestPinsFailClosedOnAFileThatCannotBeRead(t *testing.T) {
	body := []byte("print('pinned')\n")
	sum := sha256.Sum256(body)
	pinOf := func(file string) config.Entry {
		return config.Entry{ID: "p", Pin: []config.PinnedFile{{File: file, SHA256: hex.EncodeToString(sum[:])}}}
	}
	if file := os.Getenv(asNobodyPin); file != "" {
		if os.Getuid() == 0 {
			t.Fatal("the child still runs as root")
		}
		err := checkPins(pinOf(file))
		if err == nil || !strings.Contains(err.Error(), "reading pinned file "+file) || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("as uid %d, an unreadable pinned file: %v", os.Getuid(), err)
		}
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "plugin.py")
	if err := os.WriteFile(file, body, 0o200); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		t.Setenv(asNobodyPin, file)
		TestPinsFailClosedOnAFileThatCannotBeRead(t)
		return
	}
	// As root the mode does not stop the read: the content decides.
	if err := checkPins(pinOf(file)); err != nil {
		t.Fatalf("as root, a matching pinned file of mode 0200: %v", err)
	}
	if err := os.WriteFile(file, append(body, '#'), 0o200); err != nil {
		t.Fatal(err)
	}
	if err := checkPins(pinOf(file)); err == nil || !strings.Contains(err.Error(), "has sha256") {
		t.Fatalf("as root, a changed pinned file: %v", err)
	}
	if err := os.WriteFile(file, body, 0o200); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, file} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755)
	asnobody.Run(t, "TestPinsFailClosedOnAFileThatCannotBeRead", asNobodyPin+"="+file)
}
