package sandbox

import (
	"os"
	"path/filepath"
)

// submoduleDepth bounds the walk of .git/modules: a submodule's name may
// hold slashes (libs/json) and submodules nest (modules/a/modules/b).
const submoduleDepth = 8

// withSubmodules adds, for each protected repository configuration
// (…/.git/config), the configuration, hooks, rules and pointers to other
// repositories of the submodules git keeps beneath it
// (.git/modules/<name>/config, hooks, info, commondir, config.worktree,
// worktrees): git in
// the outer repository runs git in each submodule (`git status` does), so
// an fsmonitor set there runs outside the sandbox as surely as one in
// .git/config. Only submodules that exist when the command starts are
// covered; one the command adds itself stays writable for its run.
func withSubmodules(paths []string) []string {
	out := append([]string(nil), paths...)
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		if filepath.Base(p) != "config" || filepath.Base(filepath.Dir(p)) != ".git" {
			continue
		}
		for _, g := range gitDirs(filepath.Join(filepath.Dir(p), "modules"), submoduleDepth) {
			add(filepath.Join(g, "config"))
			add(filepath.Join(g, "hooks"))
			add(filepath.Join(g, "info"))
			add(filepath.Join(g, "commondir"))
			add(filepath.Join(g, "config.worktree"))
			add(filepath.Join(g, "worktrees"))
		}
	}
	return out
}

// gitDirs are the git directories (HEAD beside objects) beneath dir, the
// names between them followed, within depth levels. Symlinks are not
// followed: git makes none there.
func gitDirs(dir string, depth int) []string {
	if depth == 0 {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(dir, e.Name())
		if isGitDir(d) {
			out = append(out, d)
			out = append(out, gitDirs(filepath.Join(d, "modules"), depth-1)...)
			continue
		}
		out = append(out, gitDirs(d, depth-1)...)
	}
	return out
}

func isGitDir(d string) bool {
	head, err := os.Lstat(filepath.Join(d, "HEAD"))
	if err != nil || !head.Mode().IsRegular() {
		return false
	}
	objects, err := os.Lstat(filepath.Join(d, "objects"))
	return err == nil && objects.IsDir()
}
