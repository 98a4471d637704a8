// Package workspace confines the built-in tools to an agent's workspace:
// it turns a path argument into a path relative to the workspace, refusing
// `..` escapes and absolute paths outside it, and opens the workspace as an
// os.Root so that every file operation refuses, at open time, a symlink
// that leads outside (checked component by component by the kernel's
// openat, so a symlink swapped in between a check and the use is refused
// too).
//
// A tool uses it in three steps:
//
//	dir, err := workspace.Dir(call.Workspace)   // where the agent works
//	rel, err := workspace.Rel(dir, args.Path)     // the argument, confined
//	root, err := os.OpenRoot(dir)                 // every open goes through root
//	f, err := root.Open(rel)
//	if err != nil { err = workspace.Explain(err, args.Path, dir) }
//
// Every refusal is an *errs.Error with code PATH_OUTSIDE_WORKSPACE and a
// reason naming the rule (workspace/dotdot, workspace/absolute,
// workspace/symlink); its message is meant for the model.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Codes and reasons of the package.
const (
	// OutsideWorkspace: a path argument leads outside the agent's
	// workspace; the reason names the rule it broke.
	OutsideWorkspace errs.Code = "PATH_OUTSIDE_WORKSPACE"
	// BadWorkspace: the workspace itself is unusable (relative, missing).
	BadWorkspace errs.Code = "WORKSPACE_INVALID"

	// ReasonDotDot: a relative path climbs out with "..".
	ReasonDotDot = "workspace/dotdot"
	// ReasonAbsolute: an absolute path outside the workspace.
	ReasonAbsolute = "workspace/absolute"
	// ReasonSymlink: a symlink on the way leads outside the workspace
	// (or is absolute, which os.Root refuses as well).
	ReasonSymlink = "workspace/symlink"
)

// Dir returns the workspace a call works in: ws when set, the process's
// working directory when ws is empty. A relative ws is refused: the loop
// fills it from the agent's options, where it is absolute.
func Dir(ws string) (string, error) {
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", errs.Wrap(BadWorkspace, err, "the workspace is not set and the working directory is unknown")
		}
		return wd, nil
	}
	if !filepath.IsAbs(ws) {
		return "", errs.New(BadWorkspace, fmt.Sprintf("the workspace %q is not an absolute path; set the agent's workspace: to an absolute directory", ws))
	}
	return filepath.Clean(ws), nil
}

// Rel resolves the path argument p against the workspace dir (absolute,
// as Dir returns) and returns it relative to dir, slash-separated, "." for
// the workspace itself. It is lexical: it refuses what can be seen in the
// string (".." climbing out, an absolute path elsewhere); symlinks are for
// os.Root to refuse when the path is opened.
func Rel(dir, p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		if r, ok := under(dir, c); ok {
			return r, nil
		}
		// The workspace may be named through a symlink (/tmp on some
		// systems); an absolute path naming its real location is inside.
		if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
			if r, ok := under(real, c); ok {
				return r, nil
			}
		}
		return "", errs.New(OutsideWorkspace, fmt.Sprintf("%s is outside the workspace %s: absolute paths must lie inside the workspace; give a path relative to it", Quote(p), dir)).WithReason(ReasonAbsolute)
	}
	c := filepath.Clean(p)
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", errs.New(OutsideWorkspace, fmt.Sprintf("%s climbs out of the workspace %s with \"..\": paths must stay inside the workspace", Quote(p), dir)).WithReason(ReasonDotDot)
	}
	return filepath.ToSlash(c), nil
}

// under reports p (clean, absolute) relative to dir when it lies inside.
func under(dir, p string) (string, bool) {
	r, err := filepath.Rel(dir, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// Open opens the workspace dir as an os.Root, the one handle every file
// operation of a tool goes through.
func Open(dir string) (*os.Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errs.Wrap(BadWorkspace, err, fmt.Sprintf("cannot open the workspace %s; check that it exists and is a directory", dir))
	}
	return r, nil
}

// Explain turns the error of an os.Root operation on the argument p into
// one naming the rule when os.Root refused an escape (a symlink leading
// outside); other errors come back unchanged.
func Explain(err error, p, dir string) error {
	if err == nil || !Escaped(err) {
		return err
	}
	return errs.Wrap(OutsideWorkspace, Bare(err), fmt.Sprintf("%s goes through a symlink that leads outside the workspace %s (or is absolute): symlinks out of the workspace are never followed", Quote(p), dir)).WithReason(ReasonSymlink)
}

// Escaped reports whether err is os.Root refusing a path that escapes it.
// os.Root does not export that error, so its text is matched; a test holds
// the match against the Go release in use.
func Escaped(err error) bool {
	// The refusal may sit under several *os.PathError (MkdirAll wraps
	// the stat that refused).
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}
