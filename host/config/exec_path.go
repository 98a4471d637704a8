package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ExecPath is where an exec: entry's binary is, as dsh runs it, checks it
// and protects it: an absolute path as written; a relative one — a bare
// name too — from the folder of the config file, so a config and the
// plugins beside it work wherever dsh is started. A bare name is not
// looked up on PATH: the binary dsh runs with its own rights, pins and
// protects must not depend on the environment it was started in. A config
// built in code (no file) resolves from the working directory.
func (c *Config) ExecPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	dir := c.wd
	if c.File != "" {
		dir = filepath.Dir(c.File)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(c.wd, dir)
		}
	}
	return filepath.Join(dir, p)
}

// where names an exec: path as written for a config problem, and for a
// relative one the folder it was looked for in, as the config names it.
func (c *Config) where(written string) string {
	if written == "" || filepath.IsAbs(written) {
		return fmt.Sprintf("%q", written)
	}
	dir := "the working directory"
	if c.File != "" {
		dir = fmt.Sprintf("%q", filepath.Dir(c.File))
	}
	note := ""
	if !strings.ContainsRune(written, '/') {
		note = "; a bare name is not looked up on PATH, write the full path"
	}
	return fmt.Sprintf("%q (relative to the config file's folder, %s%s)", written, dir, note)
}
