// Package agentsmd is the prompt.agents-md plugin: it puts the project's
// instruction files — AGENTS.md in the agent's workspace and in each
// directory above it up to the repository root — into the agent's system
// prompt, as one section.
//
// Which files: the project top is the nearest directory at or above the
// workspace holding a .git entry, never above the user's home when the
// workspace lies inside it; without a repository it is the workspace
// itself. Each directory from the top down to the workspace contributes the
// first of the configured names (default AGENTS.md) that is a regular file.
// The files are read through an os.Root at the top, so a symlink that stays
// inside the project is followed and one that leads outside is refused.
//
// Order and caps: the section lists the files top first, each under its
// path from the top, so the nearest file comes last and wins. Each file is
// cut at max_file_bytes and all of them share max_bytes, handed out nearest
// first; a cut file ends with a visible note. A file that cannot be read,
// holds a NUL byte or is not UTF-8 is skipped with a log line (codes
// AGENTSMD_UNREADABLE, AGENTSMD_BINARY, AGENTSMD_OUTSIDE); it never fails
// the agent. No file, no section.
//
// Changes: the files are read when the agent is created (or when the
// plugin is applied, for agents already running) and, with reload on (the
// default), checked at the start of every turn with one stat per candidate
// path; a change rereads them and replaces the section before the turn's
// first request. Steps within a turn cost nothing.
//
// Mount it on the root for every agent, or in a preset for the agents
// that use it.
package agentsmd

import (
	stdctx "context"
	"fmt"
	"os"
	"strings"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/hashicorp/go-hclog"
)

// ID is the plugin's id.
const ID = "prompt.agents-md"

// SectionName is the name of the system prompt section.
const SectionName = "agents-md"

// Config is the plugin's configuration.
type Config struct {
	// Names are the file names looked for in each directory, in order of
	// preference: a directory contributes the first that exists. Default
	// [AGENTS.md].
	Names []string `koanf:"names" json:"names,omitempty"`
	// MaxFileBytes caps one file (default 16384).
	MaxFileBytes int `koanf:"max_file_bytes" json:"max_file_bytes,omitempty"`
	// MaxBytes caps all the files together (default 32768), shared out
	// nearest first.
	MaxBytes int `koanf:"max_bytes" json:"max_bytes,omitempty"`
	// Order places the section among the others (default 100: after the
	// agent's own system_prompt, which is 0).
	Order int `koanf:"order" json:"order,omitempty"`
	// Reload checks the files at the start of each turn and picks up a
	// change (default true). Off, they are read once per agent.
	Reload bool `koanf:"reload" json:"reload"`
}

// Defaults returns the config an entry's keys are decoded over.
func (Config) Defaults() Config {
	return Config{Names: []string{"AGENTS.md"}, MaxFileBytes: 16 << 10, MaxBytes: 32 << 10, Order: 100, Reload: true}
}

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	if len(c.Names) == 0 {
		return errs.New(errs.InvalidArgument, "names is empty; list at least one file name, such as AGENTS.md")
	}
	for _, n := range c.Names {
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, `/\`) {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("names: %q is not a plain file name; give names such as AGENTS.md, without directories", n))
		}
	}
	if c.MaxFileBytes <= 0 || c.MaxBytes <= 0 {
		return errs.New(errs.InvalidArgument, "max_file_bytes and max_bytes must be positive")
	}
	return nil
}

// Plugin is prompt.agents-md.
var Plugin = plugin.Register(ID, "puts the project's AGENTS.md files (workspace up to the repository root) into the system prompt", apply, agents.Key, systemprompt.Key, protect.Key)

// section holds the text in the scope it is applied in; disposing its fiber
// removes it.
var section = dshctx.Define(ID+"/section", func(ctx *dshctx.Context, s sectionConfig) error {
	svc, err := systemprompt.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Section(ctx, SectionName, s.order, s.text)
}, systemprompt.Key)

type sectionConfig struct {
	order int
	text  string
}

type plug struct {
	cfg  Config
	log  hclog.Logger
	home string

	mu     sync.Mutex
	agents map[string]*agentState
	closed bool
}

// agentState is what the plugin keeps per agent. mu serializes a check
// with a dispose of the plugin.
type agentState struct {
	agent  agents.Agent
	mu     sync.Mutex
	lay    layout
	stamps []stamp
	text   string
	holder *dshctx.Fiber // the fiber holding the section; nil without one
}

func apply(ctx *dshctx.Context, cfg Config) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	// The names it loads are instructions for every later session: the
	// file tools ask a person before writing them (AGENTS.md is on the
	// list by default; configured names join it while this is mounted).
	var names []protect.Entry
	for _, n := range cfg.Names {
		names = append(names, protect.Entry{Path: n, What: "agent instructions: dsh puts this file into the system prompt of every later session (prompt.agents-md)"})
	}
	if err := protect.Register(ctx, names...); err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	p := &plug{cfg: cfg, log: ctx.Logger(), home: home, agents: map[string]*agentState{}}
	if _, err := agents.EventCreated.On(ctx, func(_ stdctx.Context, a agents.Agent) error { p.attach(a); return nil }); err != nil {
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error { p.detach(a); return nil }); err != nil {
		return err
	}
	if cfg.Reload {
		if _, err := agents.EventStatus.On(ctx, func(_ stdctx.Context, c agents.StatusChange) error {
			if c.To == agents.StatusRunning {
				p.check(c.Agent)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if _, err := ctx.OnDispose("agents-md sections", p.close); err != nil {
		return err
	}
	// Agents that run already (the plugin was added by a reload): the
	// listeners above came too late for their creation. In a preset, only
	// the scope's own agent.
	for _, a := range reg.List() {
		if ctx.Tag() == "" || ctx.Tag() == a.ID() {
			p.attach(a)
		}
	}
	return nil
}

// attach lays out and reads an agent's files and adds the section.
func (p *plug) attach(a agents.Agent) {
	w, ok := a.(interface{ Workspace() string })
	if !ok || w.Workspace() == "" {
		p.log.Debug("agents-md: the agent has no workspace; no project instructions", "agent", a.ID())
		return
	}
	lay, err := discover(w.Workspace(), p.cfg.Names, p.home)
	if err != nil {
		p.log.Warn("agents-md: no project instructions for the agent", "agent", a.ID(), "error", err, "code", errs.CodeOf(err))
		return
	}
	st := &agentState{agent: a, lay: lay}
	p.mu.Lock()
	if p.closed || p.agents[a.ID()] != nil {
		p.mu.Unlock()
		return
	}
	p.agents[a.ID()] = st
	p.mu.Unlock()

	st.mu.Lock()
	defer st.mu.Unlock()
	st.stamps, _ = st.lay.stat(nil)
	p.refresh(st)
}

// check runs at a turn's start: one stat per candidate, and a reread only
// when one changed.
func (p *plug) check(a agents.Agent) {
	p.mu.Lock()
	st := p.agents[a.ID()]
	p.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var changed bool
	if st.stamps, changed = st.lay.stat(st.stamps); changed {
		p.refresh(st)
	}
}

// refresh rereads st's files and replaces the section when its text
// changed. st.mu is held.
func (p *plug) refresh(st *agentState) {
	files := st.lay.read(p.cfg.MaxFileBytes, p.cfg.MaxBytes, func(path string, err error) {
		p.log.Warn("agents-md: file skipped", "agent", st.agent.ID(), "file", path, "code", errs.CodeOf(err), "error", err)
	})
	// What Claude Code would have read and dsh does not, said at each
	// reread (a change), not at every turn.
	for _, f := range files {
		if refs := st.lay.imports(f, p.home); len(refs) > 0 {
			p.log.Warn(fmt.Sprintf("agents-md: %s has Claude Code imports, which dsh does not follow: %s; the model reads them as written, not the files they name (put what they hold in the file itself)",
				f.label, strings.Join(refs, ", ")), "agent", st.agent.ID())
		}
	}
	for _, f := range st.lay.claudeFiles(p.cfg.Names) {
		p.log.Warn(fmt.Sprintf("agents-md: %s is read by Claude Code beside CLAUDE.md, and not by dsh, which reads one file per directory (the first of names that is there)", f), "agent", st.agent.ID())
	}
	text := render(&st.lay, files)
	if text == st.text && (text == "") == (st.holder == nil) {
		return
	}
	if st.holder != nil {
		_ = st.holder.Dispose(stdctx.Background())
		st.holder = nil
	}
	st.text = text
	if text == "" {
		return
	}
	scope := st.agent.Context()
	f, err := scope.Plugin(section, sectionConfig{order: p.cfg.Order, text: text})
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		p.log.Warn("agents-md: the section could not be added", "agent", st.agent.ID(), "error", err)
		if f != nil {
			_ = f.Dispose(stdctx.Background())
		}
		st.text = ""
		return
	}
	st.holder = f
	for _, f := range files {
		if f.cut != "" {
			p.log.Info("agents-md: file cut", "agent", st.agent.ID(), "file", f.label, "size", f.size, "kept", len(f.text), "cap", f.cut)
		}
	}
}

func (p *plug) detach(a agents.Agent) {
	p.mu.Lock()
	st := p.agents[a.ID()]
	delete(p.agents, a.ID())
	p.mu.Unlock()
	if st == nil {
		return
	}
	// The section goes with the agent's scope; only forget the fiber.
	st.mu.Lock()
	st.holder = nil
	st.mu.Unlock()
}

// close removes the sections the plugin added: it is being unloaded while
// the agents stay.
func (p *plug) close() error {
	p.mu.Lock()
	p.closed = true
	all := p.agents
	p.agents = map[string]*agentState{}
	p.mu.Unlock()
	for _, st := range all {
		st.mu.Lock()
		if st.holder != nil {
			_ = st.holder.Dispose(stdctx.Background())
			st.holder = nil
		}
		st.mu.Unlock()
	}
	return nil
}
