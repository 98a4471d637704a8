// Package skills is the prompt.skills plugin: it loads Agent Skills —
// folders holding a SKILL.md with YAML front matter, the open format Claude
// Code, Codex, opencode and others read — from the workspace's and the
// user's skill folders, lists their names and descriptions in the agent's
// system prompt, and offers the model a skill tool that returns a skill's
// instructions when it decides to use one. The skill's other files
// (scripts/, references/, assets/) are not served by the plugin: the
// model reads them with the workspace file tools, from the folder the
// tool names, so the workspace's confinement, protection and sandbox
// apply to them as to any file.
//
// Folders are scanned when an agent is created and again at the start of
// each of its turns, so a skill added or edited reaches the next turn. A
// SKILL.md that breaks the specification (name rules, description length,
// field types) is left out with a warning naming the file, the line and
// the fix; it never fails the agent.
//
// Mount it on the root for every agent, or in a preset for its agents
// only. Several entries (the user's, a plugin bundle's) combine: each
// agent gets one list and one skill tool over the folders of all the
// entries that reach it, the first mounted entry's folders first.
package skills

import (
	stdctx "context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// ID is the plugin's id, as config names it (use: prompt.skills): plugin ids
// are namespaced, and the list of skills is part of the prompt.
const ID = "prompt.skills"

// SectionName is the system prompt section the skills are listed in.
const SectionName = "skills"

// sectionOrder places the list after the agent's own prompt (0) and the
// project's AGENTS.md (100).
const sectionOrder = 150

// Plugin is the skills plugin.
var Plugin = plugin.Register(ID, "loads Agent Skills (SKILL.md folders): names and descriptions in the system prompt, a skill tool that loads one",
	apply, agents.Key, protect.Key)

// entries numbers the plugin's entries in the order they are applied,
// which is their order of precedence.
var entries atomic.Uint64

type plug struct {
	seq  uint64
	cfg  Config
	log  hclog.Logger
	home string

	mu     sync.Mutex
	agents map[string]*shared
	closed bool
}

func apply(ctx *dshctx.Context, cfg Config) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	p := &plug{seq: entries.Add(1), cfg: cfg, log: ctx.Logger(), home: homeDir(), agents: map[string]*shared{}}
	// What a skill says becomes the model's instructions in every later
	// session: the file tools ask a person before writing there.
	var protected []protect.Entry
	for _, path := range cfg.Paths {
		if !filepath.IsAbs(path) && !strings.HasPrefix(path, "~") {
			path = filepath.ToSlash(filepath.Clean(path)) // that folder in any workspace
		} else if r := resolve([]string{path}, "", p.home); len(r) == 1 {
			path = r[0]
		} else {
			continue
		}
		protected = append(protected, protect.Entry{Path: path, What: "agent skills: dsh offers these instructions to the model (" + ID + ")"})
	}
	if err := protect.Register(ctx, protected...); err != nil {
		return err
	}
	if _, err := agents.EventCreated.On(ctx, func(_ stdctx.Context, a agents.Agent) error { p.attach(a); return nil }); err != nil {
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error { p.detach(a); return nil }); err != nil {
		return err
	}
	if _, err := agents.EventStatus.On(ctx, func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To == agents.StatusRunning {
			p.mu.Lock()
			sh := p.agents[c.Agent.ID()]
			p.mu.Unlock()
			// One rescan per turn, by the first entry reaching the agent.
			if sh != nil && sh.leads(p.seq) {
				sh.refresh()
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := ctx.OnDispose("skills of the agents", p.close); err != nil {
		return err
	}
	// Agents already running (a reload added the plugin); in a preset,
	// only the scope's own agent.
	for _, a := range reg.List() {
		if ctx.Tag() == "" || ctx.Tag() == a.ID() {
			p.attach(a)
		}
	}
	return nil
}

func workspaceOf(a agents.Agent) string {
	if w, ok := a.(interface{ Workspace() string }); ok {
		return w.Workspace()
	}
	return ""
}

// attach adds the entry's folders to the agent's skills.
func (p *plug) attach(a agents.Agent) {
	sh, err := sharedKey.Own(a.Context(), func() *shared { return &shared{agent: a, log: p.log, warned: map[string]string{}} })
	if err != nil {
		p.log.Warn("skills: the agent's skills cannot be set up", "agent", a.ID(), "error", err)
		return
	}
	p.mu.Lock()
	if p.closed || p.agents[a.ID()] != nil {
		p.mu.Unlock()
		return
	}
	p.agents[a.ID()] = sh
	p.mu.Unlock()
	sh.add(p.seq, resolve(p.cfg.Paths, workspaceOf(a), p.home))
}

func (p *plug) detach(a agents.Agent) {
	p.mu.Lock()
	delete(p.agents, a.ID())
	p.mu.Unlock()
	// The agent's scope takes its section and tool with it.
}

// close takes the entry's folders out of every agent's skills: the entry
// is being unloaded while the agents stay.
func (p *plug) close() error {
	p.mu.Lock()
	p.closed = true
	all := p.agents
	p.agents = map[string]*shared{}
	p.mu.Unlock()
	for _, sh := range all {
		sh.remove(p.seq)
	}
	return nil
}

// sharedKey holds, in each agent's scope, the skills every entry reaching
// the agent contributes to, with the one section and the one tool made of
// them.
var sharedKey = dshctx.NewKey[*shared](ID + "/agent")

type shared struct {
	agent agents.Agent
	log   hclog.Logger
	files cache

	allDirs atomic.Pointer[[]string]

	mu        sync.Mutex
	sources   []source
	text      string
	section   *dshctx.Fiber // holds the system prompt section; nil without one
	toolFiber *dshctx.Fiber // holds the skill tool; nil while there is no skill
	warned    map[string]string
}

// source is one entry's folders for the agent.
type source struct {
	seq  uint64
	dirs []string
}

func (sh *shared) add(seq uint64, dirs []string) {
	sh.mu.Lock()
	i := 0
	for i < len(sh.sources) && sh.sources[i].seq < seq {
		i++
	}
	sh.sources = append(sh.sources[:i], append([]source{{seq, dirs}}, sh.sources[i:]...)...)
	sh.setDirs()
	sh.mu.Unlock()
	sh.refresh()
}

func (sh *shared) remove(seq uint64) {
	sh.mu.Lock()
	for i, s := range sh.sources {
		if s.seq == seq {
			sh.sources = append(sh.sources[:i], sh.sources[i+1:]...)
			break
		}
	}
	sh.setDirs()
	sh.mu.Unlock()
	sh.refresh()
}

// leads reports whether seq is the first of the entries reaching the
// agent.
func (sh *shared) leads(seq uint64) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.sources) > 0 && sh.sources[0].seq == seq
}

// dirs is every entry's folders, in precedence order. It takes no lock,
// so a running skill call never waits on a refresh that removes its tool.
func (sh *shared) dirs() []string {
	if d := sh.allDirs.Load(); d != nil {
		return *d
	}
	return nil
}

// setDirs publishes the folders of sh.sources. sh.mu is held.
func (sh *shared) setDirs() {
	var out []string
	for _, s := range sh.sources {
		out = append(out, s.dirs...)
	}
	sh.allDirs.Store(&out)
}

// refresh rescans the folders and replaces the section when the list
// changed. The skill tool is offered while there is a skill to load: an
// agent without skills sees no trace of the plugin.
func (sh *shared) refresh() {
	list, problems := sh.files.scan(sh.dirs())
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.sources) == 0 {
		list, problems = nil, nil
	}
	sh.report(list, problems)
	sh.offerTool(len(list) > 0)
	text := render(list)
	if text == sh.text && (text == "") == (sh.section == nil) {
		return
	}
	if sh.section != nil {
		_ = sh.section.Dispose(stdctx.Background())
		sh.section = nil
	}
	sh.text = text
	if text == "" {
		return
	}
	f, err := sh.agent.Context().Plugin(section, text)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		sh.log.Warn("skills: the list could not be added to the system prompt", "agent", sh.agent.ID(), "error", err)
		if f != nil {
			_ = f.Dispose(stdctx.Background())
		}
		sh.text = ""
		return
	}
	sh.section = f
}

// offerTool adds or removes the skill tool. sh.mu is held.
func (sh *shared) offerTool(on bool) {
	switch {
	case !on && sh.toolFiber != nil:
		_ = sh.toolFiber.Dispose(stdctx.Background())
		sh.toolFiber = nil
	case on && sh.toolFiber == nil:
		f, err := sh.agent.Context().Plugin(toolHolder, sh)
		if err == nil {
			err = f.Await(stdctx.Background())
		}
		if err != nil {
			sh.log.Warn("skills: the skill tool could not be added", "agent", sh.agent.ID(), "error", err)
			if f != nil {
				_ = f.Dispose(stdctx.Background())
			}
			return
		}
		sh.toolFiber = f
	}
}

// report logs each problem once per change, not at every turn. sh.mu is
// held.
func (sh *shared) report(list []Skill, problems []Problem) {
	now := map[string]string{}
	for _, pr := range problems {
		now[pr.File] = pr.Err.Error()
		if sh.warned[pr.File] != now[pr.File] {
			sh.log.Warn("skills: skill left out", "agent", sh.agent.ID(), "code", errs.CodeOf(pr.Err), "error", pr.Err)
		}
	}
	for _, s := range list {
		// Keys that change what the skill does in Claude Code are
		// warnings, each with what dsh does instead; the rest a note.
		var differ, ignored []string
		if len(s.AllowedTools) > 0 {
			// Read and valid, but it grants nothing in dsh.
			differ = append(differ, "allowed-tools: grants nothing; the skill's calls go through approval as any other")
		}
		for _, k := range s.Ignored {
			if instead, ok := changing[k]; ok {
				differ = append(differ, k+": "+instead)
			} else {
				ignored = append(ignored, k)
			}
		}
		if len(differ)+len(ignored)+len(s.Derived) == 0 {
			continue
		}
		msg := strings.Join(differ, "; ") + " ignored " + strings.Join(ignored, " ") + " derived " + strings.Join(s.Derived, " ")
		now[s.File] = msg
		if sh.warned[s.File] == msg {
			continue
		}
		if len(differ) > 0 {
			sh.log.Warn("skills: "+s.File+": front matter dsh does not apply: "+strings.Join(differ, "; "), "agent", sh.agent.ID())
		}
		if len(ignored) > 0 {
			sh.log.Info("skills: front matter fields dsh does not apply are ignored", "agent", sh.agent.ID(), "file", s.File, "fields", ignored)
		}
		if len(s.Derived) > 0 {
			sh.log.Info("skills: "+s.File+": the front matter lacks fields the Agent Skills specification requires; taken as Claude Code takes them: "+
				strings.Join(s.Derived, "; "), "agent", sh.agent.ID())
		}
	}
	sh.warned = now
}

// section holds the list in the agent's scope; disposing its fiber
// removes it.
var section = dshctx.Define(ID+"/section", func(ctx *dshctx.Context, text string) error {
	svc, err := systemprompt.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Section(ctx, SectionName, sectionOrder, text)
}, systemprompt.Key)

// toolHolder registers the skill tool in the agent's scope.
var toolHolder = dshctx.Define(ID+"/tool", func(ctx *dshctx.Context, sh *shared) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Register(ctx, sh.tool())
}, tools.Key)

// Has reports whether the agent has a skill named name that it is offered
// (valid, not shadowed, not model-disabled). The commands plugin asks, so
// that a "/name" typed for a skill, which Claude Code runs as a command,
// is refused saying it is a skill rather than as an unknown command.
func Has(a agents.Agent, name string) bool {
	sh, err := sharedKey.Get(a.Context())
	if err != nil {
		return false
	}
	list, _ := sh.files.scan(sh.dirs())
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}
