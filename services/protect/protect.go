// Package protect is the one list of protected paths: the files dsh loads
// as config, code or instructions (its config file, hooks files, plugin
// binaries, AGENTS.md, .claude/, .agents/, .mcp.json), git's own files
// (.git/, whose config and hooks git runs outside any sandbox), dsh's
// session store, and what the operator adds. A model that could rewrite
// them would run code as dsh's user the next time dsh or git starts, so the
// file tools write them only after a person approves (see tools.files), and
// the bash sandbox can mount them read-only (Paths).
//
// The list is a service on the context tree (Key), provided once per tree
// by the core services, so two hosts in one process keep two lists. Whoever
// loads a file registers it with Register while the file is in use; the
// entry goes away with the registering plugin.
//
// An entry's Path is either relative (slash-separated, ".git/config"),
// which protects that sequence of path components wherever it appears in a
// workspace — sub/.git/config as much as .git/config — or absolute, which
// protects that one file or folder. Either protects everything below it.
// Names are compared without regard to case, so a case-insensitive file
// system cannot alias a protected name. Callers pass paths that are already
// clean and, where they exist, resolved through symlinks: the file tools
// check both the name the model gave and the file it lands on.
package protect

import (
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
)

// Entry is one protected path and what it is.
type Entry struct {
	// Path is relative (matched as components anywhere in a workspace) or
	// absolute (one file or folder); everything below it is covered too.
	Path string `koanf:"path" json:"path"`
	// What names the file for the person asked before it is written, and
	// why it matters: "git's configuration: a change can run commands
	// outside the sandbox".
	What string `koanf:"what" json:"what,omitempty"`
	// Secret marks what a command must not read either (a token, recorded
	// sessions): the bash sandbox shows it empty rather than read-only.
	// Files there may be dsh's user's alone, and the sandbox's idmapped
	// workspace would let the command read them as that user.
	Secret bool `koanf:"secret" json:"secret,omitempty"`
}

// Defaults are the entries every list starts with: what dsh, Claude Code
// and git load from a workspace whatever the config says. The more specific
// entries come first so a match names the file most precisely.
var Defaults = []Entry{
	{Path: ".git/config", What: "git's configuration: a change can make git run commands outside the sandbox (core.fsmonitor, core.hooksPath, aliases) the next time anyone runs git here"},
	{Path: ".git/hooks", What: "git's hooks folder: git runs these scripts outside the sandbox on commit, checkout, merge and push"},
	{Path: ".git/info", What: "git's per-repository rules (attributes, excludes, sparse-checkout), which decide what git runs and shows"},
	{Path: ".git/commondir", What: "git's pointer to the repository's shared data: a change sends every later git here to another configuration, whose core.fsmonitor runs outside the sandbox"},
	{Path: ".git/config.worktree", What: "git's per-worktree configuration: with extensions.worktreeConfig git loads it like .git/config, so a change can run commands outside the sandbox"},
	{Path: ".git/worktrees", What: "git's linked worktrees: each holds a commondir, HEAD and config that decide which repository and configuration git loads in that worktree"},
	{Path: ".git", What: "git's repository data: git trusts what is there (and a .git file pointing elsewhere redirects git to another configuration)"},
	{Path: ".claude", What: "the .claude settings folder: hooks in .claude/settings.json run as dsh's user, unsandboxed, when dsh or Claude Code starts; its skills and commands become instructions"},
	{Path: ".agents", What: "the .agents folder: its skills, commands and instructions are loaded into the model's prompt"},
	{Path: "AGENTS.md", What: "agent instructions: dsh puts this file into the system prompt of every later session"},
	{Path: "CLAUDE.md", What: "agent instructions: dsh and Claude Code put this file into the system prompt of every later session"},
	{Path: ".mcp.json", What: "MCP server definitions: the commands in it start when an MCP client opens this folder"},
	{Path: ".dsh", What: "dsh's own folder (serve's state and token, local settings)"},
}

// Key is the service key of a tree's list.
var Key = dshctx.NewKey[*List]("protect")

// Plugin provides a list holding Defaults; package core mounts it.
var Plugin = dshctx.Define("protect", func(ctx *dshctx.Context, _ dshctx.None) error {
	return Key.Provide(ctx, New())
})

// List is a set of protected paths, safe for concurrent use.
type List struct {
	mu sync.RWMutex
	// entries in the order added; each registration has its own id so
	// removing one leaves an identical entry someone else added.
	entries []held
	next    uint64
}

type held struct {
	id uint64
	e  Entry
}

// New returns a list holding Defaults and extra.
func New(extra ...Entry) *List {
	l := &List{}
	for _, e := range append(slices.Clone(Defaults), extra...) {
		l.Add(e)
	}
	return l
}

// Add protects e until the returned function is called. A relative Path is
// cleaned and kept slash-separated; an absolute one is cleaned.
func (l *List) Add(e Entry) (remove func()) {
	e.Path = normal(e.Path)
	l.mu.Lock()
	l.next++
	id := l.next
	l.entries = append(l.entries, held{id: id, e: e})
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.entries = slices.DeleteFunc(l.entries, func(h held) bool { return h.id == id })
	}
}

// Register adds entries to the list of ctx's tree for as long as ctx's
// fiber lives: a plugin that loads a file registers it when it applies, and
// the entry leaves with the plugin (or the host, for the root). A plugin
// calling it must inject Key.
func Register(ctx *dshctx.Context, entries ...Entry) error {
	l, err := Key.Get(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, err := ctx.Effect("protect "+e.Path, func() (dshctx.Disposer, error) {
			remove := l.Add(e)
			return func() error { remove(); return nil }, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// Entries returns a copy of the list.
func (l *List) Entries() []Entry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]Entry, len(l.entries))
	for i, h := range l.entries {
		out[i] = h.e
	}
	return out
}

// Match reports the entry that protects the file at p, an absolute clean
// path, when the workspace is ws (absolute, clean): a relative entry
// matches the components of p below ws, an absolute one p itself. Of
// several matches the most specific (longest Path) wins.
func (l *List) Match(ws, p string) (Entry, bool) {
	rel, inside := below(ws, p)
	relParts := split(rel)
	absParts := split(filepath.ToSlash(p))
	l.mu.RLock()
	defer l.mu.RUnlock()
	var best Entry
	found := false
	for _, h := range l.entries {
		var hit bool
		if path.IsAbs(h.e.Path) {
			hit = hasPrefix(absParts, split(h.e.Path))
		} else if inside {
			hit = containsRun(relParts, split(h.e.Path))
		}
		if hit && (!found || len(h.e.Path) > len(best.Path)) {
			best, found = h.e, true
		}
	}
	return best, found
}

// Paths returns the absolute paths the list protects in the workspace ws:
// each relative entry joined to ws (its top-level instance only; the same
// name deeper down is not listed) and each absolute entry as it is. The
// paths may not exist. The bash sandbox mounts them read-only.
func (l *List) Paths(ws string) []string { return l.paths(ws, false) }

// Secrets returns, as Paths does, the paths of the entries marked Secret:
// what the bash sandbox hides.
func (l *List) Secrets(ws string) []string { return l.paths(ws, true) }

// paths lists the entries' paths in ws, only the secret ones if secret.
func (l *List) paths(ws string, secret bool) []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []string
	for _, h := range l.entries {
		if secret && !h.e.Secret {
			continue
		}
		p := filepath.FromSlash(h.e.Path)
		if !filepath.IsAbs(p) {
			p = filepath.Join(ws, p)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// normal cleans p; a relative path stays relative, slash-separated.
func normal(p string) string {
	p = filepath.ToSlash(p)
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// below returns p relative to ws, slash-separated, when p lies inside ws.
func below(ws, p string) (string, bool) {
	r, err := filepath.Rel(ws, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// split cuts a slash path into its non-empty components.
func split(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// hasPrefix reports whether the components of p start with those of pre.
func hasPrefix(p, pre []string) bool {
	if len(pre) > len(p) {
		return false
	}
	for i := range pre {
		if !strings.EqualFold(p[i], pre[i]) {
			return false
		}
	}
	return true
}

// containsRun reports whether run appears in p as consecutive components.
func containsRun(p, run []string) bool {
	if len(run) == 0 {
		return false
	}
	for i := 0; i+len(run) <= len(p); i++ {
		if hasPrefix(p[i:], run) {
			return true
		}
	}
	return false
}

// PathsFor returns the protected paths of ctx's tree for the workspace ws
// (see List.Paths): what the bash sandbox mounts read-only. A plugin
// calling it must inject Key.
func PathsFor(ctx *dshctx.Context, ws string) ([]string, error) {
	l, err := Key.Get(ctx)
	if err != nil {
		return nil, err
	}
	return l.Paths(ws), nil
}
