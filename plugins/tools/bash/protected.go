package bash

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// readOnly is what a command in the workspace ws may not change inside
// its writable directories: sandbox.read_only, and the paths of the
// tree's protected list (services/protect) that lie beneath a writable
// directory. The file tools ask before writing those; a command cannot be
// asked mid-run, so the sandbox refuses it the write. Relative entries
// apply at the top of the workspace and of each sandbox.writable
// directory (not the command's own fresh TMPDIR, which nothing loads
// from later), and the git entries (.git/…) in every repository nested
// in them when the command starts (see nestedRepos).
//
// One entry of the list is left writable: .git as a whole, when it is the
// repository's directory. git writes objects, refs and the index there on
// every commit, and a sandbox that refused that would make the agent
// useless on a repository; what git later runs from .git (config, hooks,
// info) stays read-only. A .git that is not a directory (a worktree's or
// submodule's `gitdir:` file) is read-only: git writes nothing to it, and
// its one line would send the next git to a configuration of the
// command's making.
func (r *runner) readOnly(ws string, writable []string) []string {
	out := slices.Clone(r.cfg.Sandbox.ReadOnly)
	if r.protected == nil {
		return out
	}
	add := func(p string) {
		if slices.Contains(out, p) || !beneathAny(p, writable) {
			return
		}
		if filepath.Base(p) == ".git" && !isFile(p) {
			return
		}
		if rel, err := filepath.Rel(ws, p); err == nil && slices.Contains(out, rel) {
			return
		}
		out = append(out, p)
	}
	tops := []string{ws}
	for _, w := range r.cfg.Sandbox.Writable {
		if !filepath.IsAbs(w) {
			w = filepath.Join(ws, w)
		}
		tops = append(tops, filepath.Clean(w))
	}
	var gitEntries []string
	for _, e := range r.protected.Entries() {
		if rel := filepath.FromSlash(e.Path); !filepath.IsAbs(rel) && (rel == ".git" || strings.HasPrefix(rel, ".git"+string(filepath.Separator))) {
			gitEntries = append(gitEntries, rel)
		}
	}
	for _, top := range tops {
		for _, p := range r.protected.Paths(top) {
			add(p)
		}
		for _, repo := range nestedRepos(top) {
			for _, rel := range gitEntries {
				add(filepath.Join(repo, rel))
			}
		}
	}
	return out
}

// hidden is what a command in the workspace ws may not even read: the
// entries of the protected list marked Secret (session stores, serve's
// state and token), wherever they are.
func (r *runner) hidden(ws string) []string {
	if r.protected == nil {
		return nil
	}
	return r.protected.Secrets(ws)
}

// isFile reports whether p exists and is not a directory (a symlink to a
// directory counts as one, as git follows it). A missing .git is left to
// the placeholders of .git/config, hooks and info, so that nothing stops
// `git init` beyond what those already do.
func isFile(p string) bool {
	if _, err := os.Lstat(p); err != nil {
		return false
	}
	st, err := os.Stat(p)
	return err != nil || !st.IsDir()
}

// beneathAny reports whether p lies strictly beneath one of dirs.
func beneathAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, filepath.Clean(d)+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
