// Package editor is the seam through which an entry point that speaks to
// an editor (dsh acp) lends the file tools the editor's view of files.
//
// An editor holds files the person is changing and has not saved; the
// model should read what the person sees and write where the person will
// see it. The entry point attaches its Files to the context of a tool call
// (a tools/execute listener in the agent's scope does it); the file tools
// of tools.files then read and write through it, after the same workspace
// confinement as always. Without Files, or when Files says it cannot, they
// use the disk.
package editor

import (
	stdctx "context"
	"errors"
)

// Files reads and writes text files as the editor holds them. Paths are
// absolute and already confined to the agent's workspace.
type Files interface {
	// ReadTextFile returns the file's text, unsaved changes included. An
	// error wrapping ErrNotOffered sends the caller to the disk; any other
	// error also does, since the disk holds what the editor does not.
	ReadTextFile(ctx stdctx.Context, path string) (string, error)
	// WriteTextFile replaces the file's text (creating it), so that the
	// editor shows the change. An error wrapping ErrNotOffered sends the
	// caller to the disk; any other error fails the write.
	WriteTextFile(ctx stdctx.Context, path, text string) error
}

// ErrNotOffered is what Files returns for an operation the editor does
// not offer.
var ErrNotOffered = errors.New("the editor does not offer this file operation")

type key struct{}

// With returns ctx carrying f for the tool calls that run under it.
func With(ctx stdctx.Context, f Files) stdctx.Context {
	return stdctx.WithValue(ctx, key{}, f)
}

// From returns the Files a call runs with, if any.
func From(ctx stdctx.Context) (Files, bool) {
	f, ok := ctx.Value(key{}).(Files)
	return f, ok && f != nil
}
