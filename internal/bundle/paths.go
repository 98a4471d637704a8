package bundle

import (
	"os"
	"path/filepath"
	"strings"
)

// resolve turns a manifest path ("./custom/cmds") into an absolute path
// inside root. The format's rules: relative, starting with "./", forward
// slashes; and — Claude Code checks it, the Open Plugins spec requires it
// — once symlinks are resolved it must stay inside the root, so a bundle
// cannot make dsh load files it does not ship.
func resolve(p *problems, root, file, field, rel string) (string, bool) {
	switch {
	case rel == "":
		p.add(file, field, "empty path; write a path relative to the bundle root such as \"./commands\"")
		return "", false
	case strings.Contains(rel, `\`):
		p.add(file, field, "%q: use forward slashes", rel)
		return "", false
	case filepath.IsAbs(rel):
		p.add(file, field, "%q is absolute; paths in a bundle are relative to its root and start with \"./\"", rel)
		return "", false
	case !strings.HasPrefix(rel, "./"):
		p.add(file, field, "%q must start with \"./\" (relative to the bundle root)", rel)
		return "", false
	}
	clean := filepath.Join(root, filepath.FromSlash(rel))
	if !inside(root, clean) {
		p.add(file, field, "%q leaves the bundle root; a bundle may only name its own files", rel)
		return "", false
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		p.add(file, field, "%q: %v", rel, unwrapPathErr(err))
		return "", false
	}
	if !inside(root, real) {
		p.add(file, field, "%q resolves (through a symlink) to %s, outside the bundle root", rel, real)
		return "", false
	}
	return real, true
}

// inside reports whether path is root or below it; both are clean.
func inside(root, path string) bool {
	r, err := filepath.Rel(root, path)
	return err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// exists reports whether root/rel is there (a dangling symlink too, so
// that resolve reports it rather than the default being skipped).
func exists(root, rel string) bool {
	_, err := os.Lstat(filepath.Join(root, rel))
	return err == nil
}

// show names path for messages: relative to root, in the format's "./"
// form.
func show(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return "./" + filepath.ToSlash(r)
}
