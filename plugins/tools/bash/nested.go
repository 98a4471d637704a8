package bash

import (
	"os"
	"path/filepath"
)

// Bounds of the walk for repositories nested in a writable directory: it
// runs before every command, so it must stay cheap on a large checkout.
const (
	nestedDepth   = 6     // directory levels below the writable directory
	nestedEntries = 20000 // directory entries read in all
)

// nestedSkip are directories the walk does not enter: package caches and
// build output, large and never a repository the user runs git in.
var nestedSkip = map[string]bool{
	"node_modules": true, ".venv": true, "venv": true, "__pycache__": true,
	".tox": true, ".cache": true, "target": true, ".terraform": true,
}

// nestedRepos returns the directories strictly beneath root that hold a
// .git (a repository's directory or a worktree's or submodule's gitdir:
// file) when the command starts, within nestedDepth levels and
// nestedEntries entries. It enters no .git and follows no symlink. A
// repository deeper or further than that, or one the command creates
// itself, is not found: the file tools still protect it, the sandbox not.
func nestedRepos(root string) []string {
	var out []string
	budget := nestedEntries
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if depth > nestedDepth || budget <= 0 {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		budget -= len(entries)
		var subdirs []string
		for _, e := range entries {
			name := e.Name()
			if name == ".git" {
				if depth > 0 {
					out = append(out, dir)
				}
				continue
			}
			if e.IsDir() && !nestedSkip[name] {
				subdirs = append(subdirs, filepath.Join(dir, name))
			}
		}
		for _, d := range subdirs {
			walk(d, depth+1)
		}
	}
	walk(root, 0)
	return out
}
