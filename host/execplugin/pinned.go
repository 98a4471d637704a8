package execplugin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/hashicorp/go-plugin"
)

// pin makes a pinned entry run the file whose sha256 was checked, not
// whatever is at the path a moment later: it opens the binary once, hashes
// that open file, and points proc at the same open file, passed to the
// child as one of its descriptors and executed through fdPath. Checking by
// path and then executing the path again let a file renamed over it in
// between run unpinned. The returned file is dsh's copy of the descriptor;
// the caller closes it once the process started (or failed to).
//
// An entry without sha256 runs by path, as before: executing through a
// descriptor shows the program its path as /proc/self/fd/N, which a script
// that finds its siblings from $0 would not expect.
func pin(e config.Entry, proc *childproc.Proc) (*os.File, error) {
	if e.SHA256 == "" {
		return nil, nil
	}
	if proc.Cmd.Err != nil {
		return nil, proc.Cmd.Err // the program was not found on PATH
	}
	f, err := os.Open(proc.Cmd.Path)
	if err != nil {
		return nil, err
	}
	want, _ := hex.DecodeString(e.SHA256)
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, fmt.Errorf("reading %s to check its sha256: %w", proc.Cmd.Path, err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		f.Close()
		return nil, plugin.ErrChecksumsDoNotMatch
	}
	// The child's descriptors are stdin, stdout, stderr, then ExtraFiles
	// in order; Args[0] keeps the configured path, for the plugin's own
	// messages.
	proc.Cmd.ExtraFiles = append(proc.Cmd.ExtraFiles, f)
	proc.Cmd.Path = fdPath(2 + len(proc.Cmd.ExtraFiles))
	return f, nil
}
