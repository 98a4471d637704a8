package execplugin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dsh-go/dsh/host/config"
)

// checkPins refuses a start when a file listed under pin: does not match
// its checksum: the script an interpreter runs, or a file of an installed
// package. sha256: covers only the file exec: names, which for a Python
// plugin is the interpreter, while what the plugin does lives in the
// script. Checked at every start, restarts included, so a script changed
// while dsh runs is refused the next time the plugin starts.
//
// Unlike the binary, a pinned file is read again by the interpreter after
// this check, by path: the pin catches a changed file, not one swapped in
// the instant between the check and the interpreter's open.
func checkPins(e config.Entry) error {
	for _, f := range e.Pin {
		sum, err := fileSHA256(f.File)
		if err != nil {
			return fmt.Errorf("reading pinned file %s to check its sha256: %w", f.File, err)
		}
		if !strings.EqualFold(sum, f.SHA256) {
			return fmt.Errorf("pinned file %s has sha256 %s, but the config pins %s", f.File, sum, strings.ToLower(f.SHA256))
		}
	}
	return nil
}

// pinHint is what a failed pin check tells the operator to do.
const pinHint = "a file it pins changed or cannot be read; check what changed in it, then update its sha256 under pin: (sha256sum FILE)"

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// unpinnedScripts names the arguments that are files the entry's sha256
// does not cover: with exec: an interpreter, the script is what runs, and
// an operator who pinned the interpreter most likely meant the script.
func unpinnedScripts(e config.Entry) []string {
	if e.SHA256 == "" {
		return nil
	}
	pinned := map[string]bool{}
	for _, f := range e.Pin {
		pinned[f.File] = true
	}
	var out []string
	for _, a := range e.Args {
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() && !pinned[a] {
			out = append(out, a)
		}
	}
	return out
}
