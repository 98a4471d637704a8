// Package skills is the skills plugin: it loads Agent Skills — folders
// holding a SKILL.md with YAML front matter, the open format Claude Code,
// Codex, opencode and others read — from the workspace's and the user's
// skill folders, lists their names and descriptions in the agent's system
// prompt, and offers the model a skill tool that returns a skill's
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
// only.
package skills

import (
	stdctx "context"
	"path/filepath"
	"strings"
	"sync"

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
	apply, agents.Key, systemprompt.Key, tools.Key, protect.Key)

var section = dshctx.Define(ID+"/section", func(ctx *dshctx.Context, cfg any) error {
	svc, err := systemprompt.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Section(ctx, SectionName, sectionOrder, cfg.(string))
}, systemprompt.Key)

type plug struct {
	cfg  Config
	log  hclog.Logger
	home string

	mu     sync.Mutex
	agents map[string]*agentState
	closed bool
}

type agentState struct {
	agent  agents.Agent
	dirs   []string
	mu     sync.Mutex
	text   string
	warned map[string]string // file → the last problem logged for it
	holder *dshctx.Fiber
}

func apply(ctx *dshctx.Context, cfg Config) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	p := &plug{cfg: cfg, log: ctx.Logger(), home: homeDir(), agents: map[string]*agentState{}}
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
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	if err := svc.Register(ctx, p.tool()); err != nil {
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
			p.refresh(c.Agent)
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := ctx.OnDispose("skills sections", p.close); err != nil {
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

func (p *plug) attach(a agents.Agent) {
	st := &agentState{agent: a, dirs: resolve(p.cfg.Paths, workspaceOf(a), p.home), warned: map[string]string{}}
	p.mu.Lock()
	if p.closed || p.agents[a.ID()] != nil {
		p.mu.Unlock()
		return
	}
	p.agents[a.ID()] = st
	p.mu.Unlock()
	p.refresh(a)
}

// refresh rescans the agent's folders and replaces the section when the
// list changed.
func (p *plug) refresh(a agents.Agent) {
	p.mu.Lock()
	st := p.agents[a.ID()]
	p.mu.Unlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	list, problems := scan(st.dirs)
	p.report(st, list, problems)
	text := render(list)
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
	f, err := a.Context().Plugin(section, text)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		p.log.Warn("skills: the list could not be added to the system prompt", "agent", a.ID(), "error", err)
		if f != nil {
			_ = f.Dispose(stdctx.Background())
		}
		st.text = ""
		return
	}
	st.holder = f
}

// report logs each problem once per change, not at every turn.
func (p *plug) report(st *agentState, list []Skill, problems []Problem) {
	now := map[string]string{}
	for _, pr := range problems {
		now[pr.File] = pr.Err.Error()
		if st.warned[pr.File] != now[pr.File] {
			p.log.Warn("skills: skill left out", "agent", st.agent.ID(), "code", errs.CodeOf(pr.Err), "error", pr.Err)
		}
	}
	for _, s := range list {
		if len(s.Ignored) == 0 {
			continue
		}
		msg := "ignored"
		for _, k := range s.Ignored {
			msg += " " + k
		}
		now[s.File] = msg
		if st.warned[s.File] != msg {
			p.log.Info("skills: front matter fields outside the Agent Skills specification are ignored", "agent", st.agent.ID(), "file", s.File, "fields", s.Ignored)
		}
	}
	st.warned = now
}

func (p *plug) detach(a agents.Agent) {
	p.mu.Lock()
	st := p.agents[a.ID()]
	delete(p.agents, a.ID())
	p.mu.Unlock()
	if st != nil {
		st.mu.Lock()
		st.holder = nil // it goes with the agent's scope
		st.mu.Unlock()
	}
}

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
