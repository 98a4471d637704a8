package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dsh-go/dsh/errs"
)

// masked are the directories among dirs' ancestors (and dirs themselves)
// that only dsh's user, root, may enter: /root, a 0700 parent of the
// workspace. The command, under another uid, could not reach a writable
// directory beneath one, so the entry covers each with a read-only tmpfs
// holding only the way to the writable directories, the working
// directory and $HOME, and the few files of $HOME that tools need
// (Rules.HomeFiles). Showing such a directory whole would hand the
// command what dsh keeps there: ~/.ssh, cloud credentials, dsh's own
// config. Directories inside writable ones are left alone (the command
// may read all of those); so are those inside another masked one.
func masked(dirs, writable []string) []string {
	var out []string
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		parts := strings.Split(strings.TrimPrefix(d, "/"), "/")
		p := ""
		for _, part := range parts {
			p += "/" + part
			var st syscall.Stat_t
			if syscall.Stat(p, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				break
			}
			if st.Uid == 0 && st.Mode&0o001 == 0 {
				if !beneathAny(p, writable) && !beneathAny(p, out) {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// homeFiles are the existing paths of r.HomeFiles in home, outside the
// writable directories (which show already).
func (r Rules) homeFiles(home string, writable []string) ([]string, error) {
	names := r.HomeFiles
	if names == nil {
		names = DefaultHomeFiles
	}
	var out []string
	for _, n := range names {
		c := filepath.Clean(n)
		if filepath.IsAbs(c) || c == "." || c == ".." || strings.HasPrefix(c, "../") {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("sandbox.Attach: the home file %q is not a path inside $HOME; write it relative to $HOME, as .gitconfig", n)).WithReason("sandbox/home-file")
		}
		if !filepath.IsAbs(home) {
			continue
		}
		p := filepath.Join(home, c)
		if beneathAny(p, writable) {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}
