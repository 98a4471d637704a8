// Package files is the tools.files plugin: the built-in file tools read,
// write, edit, list, glob and grep, each confined to the agent's workspace
// (tools.Call.Workspace; the process's working directory when empty).
//
// Every path goes through package workspace: ".." escapes and absolute
// paths outside the workspace are refused before anything is opened, and
// every open goes through an os.Root, which refuses a symlink leading
// outside at open time. A refusal, like every failure the model can act
// on, is an error result, never a Go error.
package files

import (
	"fmt"
	"slices"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
)

// Names of the tools, in the order they register.
var Names = []string{"read", "write", "edit", "list", "glob", "grep"}

// Plugin registers the file tools in its context's scope: on the root for
// every agent, in a preset for one.
var Plugin = plugin.Register("tools.files", "file tools confined to the agent's workspace: read, write, edit, list, glob, grep", func(ctx *dshctx.Context, cfg Config) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	list, err := protect.Key.Get(ctx)
	if err != nil {
		return err
	}
	approvals, err := approval.Key.Get(ctx)
	if err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	cfg.guard = guard{list: list, approvals: approvals}
	for _, t := range cfg.build() {
		if err := svc.Register(ctx, t); err != nil {
			return err
		}
	}
	return nil
}, tools.Key, protect.Key, approval.Key)

// build returns the tools the config selects.
func (c Config) build() []tools.Tool {
	all := map[string]func() tools.Tool{
		"read": c.readTool, "write": c.writeTool, "edit": c.editTool,
		"list": c.listTool, "glob": c.globTool, "grep": c.grepTool,
	}
	names := c.Tools
	if len(names) == 0 {
		names = Names
	}
	var out []tools.Tool
	for _, n := range Names {
		if slices.Contains(names, n) {
			out = append(out, all[n]())
		}
	}
	return out
}

// Config is the plugin's configuration. A limit left at zero takes its
// default.
type Config struct {
	// Tools lists the tools to register; empty means all of Names.
	Tools []string `koanf:"tools" json:"tools,omitempty"`
	// ReadMaxLines caps the lines one read returns (default 2000).
	ReadMaxLines int `koanf:"read_max_lines" json:"read_max_lines,omitempty"`
	// ReadMaxBytes caps the bytes of file text one read returns
	// (default 64 KiB).
	ReadMaxBytes int `koanf:"read_max_bytes" json:"read_max_bytes,omitempty"`
	// MaxLineBytes cuts longer lines in read output (default 2000).
	MaxLineBytes int `koanf:"max_line_bytes" json:"max_line_bytes,omitempty"`
	// MaxFileBytes is the largest file edit rewrites and grep searches
	// (default 8 MiB).
	MaxFileBytes int `koanf:"max_file_bytes" json:"max_file_bytes,omitempty"`
	// ListMaxEntries caps the entries list shows (default 500).
	ListMaxEntries int `koanf:"list_max_entries" json:"list_max_entries,omitempty"`
	// GlobMaxResults caps the paths glob returns (default 500).
	GlobMaxResults int `koanf:"glob_max_results" json:"glob_max_results,omitempty"`
	// GrepMaxMatches caps the matching lines grep returns (default 200).
	GrepMaxMatches int `koanf:"grep_max_matches" json:"grep_max_matches,omitempty"`
	// GrepMaxLineBytes cuts longer matching lines in grep output
	// (default 300).
	GrepMaxLineBytes int `koanf:"grep_max_line_bytes" json:"grep_max_line_bytes,omitempty"`
	// WalkMaxEntries caps the files and folders one glob or grep visits
	// (default 200000), so a huge tree cannot stall a call.
	WalkMaxEntries int `koanf:"walk_max_entries" json:"walk_max_entries,omitempty"`
	// DiffMaxLines caps the diff an edit shows (default 60).
	DiffMaxLines int `koanf:"diff_max_lines" json:"diff_max_lines,omitempty"`
	// ProtectedWrites decides writes to protected paths (package
	// protect: .git/, .claude/, AGENTS.md, dsh's config and hooks files...):
	// "ask" (default) asks the agent's person and fails closed with nobody
	// to ask; "allow" lifts the protection for the agents this entry
	// serves, as a full-access preset may.
	ProtectedWrites string `koanf:"protected_writes" json:"protected_writes,omitempty"`

	// guard is what the protection check reads from the tree; the zero
	// value checks the default list and, with nobody to ask, refuses.
	guard guard
}

// Defaults is the configuration of an entry that sets nothing.
func (Config) Defaults() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.ReadMaxLines, 2000)
	def(&c.ReadMaxBytes, 64<<10)
	def(&c.MaxLineBytes, 2000)
	def(&c.MaxFileBytes, 8<<20)
	def(&c.ListMaxEntries, 500)
	def(&c.GlobMaxResults, 500)
	def(&c.GrepMaxMatches, 200)
	def(&c.GrepMaxLineBytes, 300)
	def(&c.WalkMaxEntries, 200000)
	def(&c.DiffMaxLines, 60)
	if c.ProtectedWrites == "" {
		c.ProtectedWrites = ProtectedAsk
	}
	return c
}

// Validate refuses unknown tool names and negative limits.
func (c Config) Validate() error {
	for _, n := range c.Tools {
		if !slices.Contains(Names, n) {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("tools.files: unknown tool %q in tools; choose among %v", n, Names))
		}
	}
	switch c.ProtectedWrites {
	case "", ProtectedAsk, ProtectedAllow:
	default:
		return errs.New(errs.InvalidArgument, fmt.Sprintf("tools.files: protected_writes is %q; use %q (the default) or %q", c.ProtectedWrites, ProtectedAsk, ProtectedAllow))
	}
	for _, l := range []struct {
		name string
		v    int
	}{
		{"read_max_lines", c.ReadMaxLines}, {"read_max_bytes", c.ReadMaxBytes}, {"max_line_bytes", c.MaxLineBytes},
		{"max_file_bytes", c.MaxFileBytes}, {"list_max_entries", c.ListMaxEntries}, {"glob_max_results", c.GlobMaxResults},
		{"grep_max_matches", c.GrepMaxMatches}, {"grep_max_line_bytes", c.GrepMaxLineBytes},
		{"walk_max_entries", c.WalkMaxEntries}, {"diff_max_lines", c.DiffMaxLines},
	} {
		if l.v < 0 {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("tools.files: %s is %d; limits must be positive (0 takes the default)", l.name, l.v))
		}
	}
	return nil
}
