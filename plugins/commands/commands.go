// Package commands is the prompt.commands plugin: prompt commands written
// as Claude Code writes them — Markdown files in .claude/commands (the
// project's) and ~/.claude/commands (the user's), with optional front
// matter (description, argument-hint, model, allowed-tools) — invoked by a
// prompt whose text is "/name args".
//
// The expansion happens in the agent controller's prepare stage
// (agent-controller/prepare), where a sender's input becomes message
// content, so every entry point — dsh run, the interactive CLI, ACP, the
// web page, webhooks, schedules — gets it once and none needs code of its
// own, and admission judges the expanded prompt, the text the model will
// read, without adding to it. The message holds what the user typed (in
// <command-name> and <command-args> tags, as Claude Code records it)
// followed by the expanded prompt; that is what the session stores and the
// model receives. A "/name" no folder holds is refused with the list of
// the commands there are; text whose first word is not a possible command
// name (a path such as /usr/bin) passes unchanged. Prompts an agent's
// model wrote for a subagent are left alone: commands are what people
// type.
//
// Files are read at each invocation, so an edit applies to the next one.
// Mount it on the root for every agent, or in a preset for its agents; two
// entries (a user's and a bundle's) combine, the first mounted winning a
// name both have.
package commands

import (
	stdctx "context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/skills"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// ID is the plugin's id, as config names it (use: prompt.commands).
const ID = "prompt.commands"

// Refusal reasons of the prepare stage, recorded as the message's refusal.
const (
	ReasonUnknown     = "commands/unknown"
	ReasonUnsupported = "commands/unsupported"
)

// Plugin is prompt.commands.
var Plugin = plugin.Register(ID, "expands a prompt \"/name args\" into the command file .claude/commands/name.md (Claude Code's format)",
	apply, protect.Key)

// Listing is the payload of commands/list.
type Listing struct {
	Agent agents.Agent
}

// EventList gathers the commands an agent can invoke from every mounted
// entry, in precedence order; dispatch it through List.
var EventList = waterfall.New("commands/list", func(stdctx.Context, Listing) ([]Command, error) { return nil, nil })

// List returns the commands agent can invoke, each once, under the name a
// prompt uses ("name", or "ns:name" for one a command of the same name
// shadows). Entry points call it to offer the commands (ACP's
// available_commands_update, the CLI's /help); without the plugin the list
// is empty.
func List(ctx stdctx.Context, agent agents.Agent) []Command {
	all, err := EventList.Dispatch(ctx, agent.Context(), Listing{Agent: agent})
	if err != nil {
		return nil
	}
	return Visible(all)
}

type plug struct {
	cfg  Config
	home string
	log  hclog.Logger

	mu     sync.Mutex
	warned map[string]string // file → the problem last logged for it
}

func apply(ctx *dshctx.Context, cfg Config) error {
	p := &plug{cfg: cfg, home: homeDir(), log: ctx.Logger(), warned: map[string]string{}}
	// A command file is a prompt a person will send: the file tools ask
	// before the model writes one.
	var protected []protect.Entry
	for _, path := range cfg.Paths {
		if !filepath.IsAbs(path) && !strings.HasPrefix(path, "~") {
			path = filepath.ToSlash(filepath.Clean(path))
		} else if r := resolve([]string{path}, "", p.home); len(r) == 1 {
			path = r[0]
		} else {
			continue
		}
		protected = append(protected, protect.Entry{Path: path, What: "prompt commands: a person's /name prompt becomes this file's text (" + ID + ")"})
	}
	if err := protect.Register(ctx, protected...); err != nil {
		return err
	}
	if _, err := EventList.On(ctx, func(c stdctx.Context, l Listing, next waterfall.Next[Listing, []Command]) ([]Command, error) {
		rest, err := next.Call(c, l)
		return append(p.commands(l.Agent), rest...), err
	}); err != nil {
		return err
	}
	// Every entry answers the session's question with the whole list
	// (List gathers all entries), so the first to hear it ends it.
	if _, err := sessions.EventCommands.On(ctx, func(c stdctx.Context, q sessions.CommandsQuery, _ waterfall.Next[sessions.CommandsQuery, []sessions.PromptCommand]) ([]sessions.PromptCommand, error) {
		var out []sessions.PromptCommand
		for _, cmd := range List(c, q.Agent) {
			out = append(out, sessions.PromptCommand{Name: cmd.Name, Description: cmd.Description, ArgumentHint: cmd.ArgumentHint})
		}
		return out, nil
	}); err != nil {
		return err
	}
	_, err := agentcontroller.EventPrepare.On(ctx, p.prepare)
	return err
}

// commands scans the agent's folders; a problem is logged when it first
// appears or changes, not at every scan.
func (p *plug) commands(a agents.Agent) []Command {
	list, problems := scan(resolve(p.cfg.Paths, workspaceOf(a), p.home))
	if ns := p.cfg.Namespace; ns != "" {
		for i := range list {
			list[i].Namespace = strings.Trim(ns+":"+list[i].Namespace, ":")
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range problems {
		if msg := pr.Err.Error(); p.warned[pr.File] != msg {
			p.warned[pr.File] = msg
			p.log.Warn("commands: command file left out", "agent", a.ID(), "code", errs.CodeOf(pr.Err), "error", pr.Err)
		}
	}
	return list
}

func workspaceOf(a agents.Agent) string {
	if w, ok := a.(interface{ Workspace() string }); ok {
		return w.Workspace()
	}
	return ""
}

// prepare expands an invocation this entry knows, passes on one another
// entry knows, and refuses one nobody knows.
func (p *plug) prepare(ctx stdctx.Context, in agentcontroller.Preparation, next agentcontroller.PrepareNext) (agentcontroller.Preparation, error) {
	if in.Source.Kind == agentcontroller.SourceSubagent {
		return next.Call(ctx, in)
	}
	text, at := textOf(in)
	inv, ok := Parse(text)
	if !ok {
		return next.Call(ctx, in)
	}
	c, ok := lookup(p.commands(in.Agent), inv.Name)
	if !ok {
		all := List(ctx, in.Agent)
		if _, known := lookup(all, inv.Name); known {
			return next.Call(ctx, in) // another entry expands it
		}
		if skills.Has(in.Agent, inv.Name) {
			return in, agentcontroller.RefusePreparation(ReasonUnknown, fmt.Sprintf(
				"/%s is a skill, not a command: Claude Code also runs skills as /name, dsh does not. The model loads a skill by itself when a task matches its description; ask for it in words (\"use the %s skill to …\")", inv.Name, inv.Name))
		}
		return in, agentcontroller.RefusePreparation(ReasonUnknown, unknown(inv.Name, all))
	}
	expanded, err := Expand(c, inv.Args)
	if err != nil {
		return in, agentcontroller.RefusePreparation(ReasonUnsupported, err.Error())
	}
	if c.Model != "" {
		p.log.Warn("commands: the command's model is not applied; the turn uses the agent's model", "agent", in.Agent.ID(), "command", c.Qualified(), "model", c.Model, "file", c.File)
	}
	for _, w := range Unapplied(c) {
		p.log.Warn("commands: "+w, "agent", in.Agent.ID(), "command", c.Qualified())
	}
	if len(c.AllowedTools) > 0 {
		p.log.Warn("commands: the command's allowed-tools are not applied; its tool calls go through approval as any other", "agent", in.Agent.ID(), "command", c.Qualified(), "allowed_tools", c.AllowedTools, "file", c.File)
	}
	return next.Call(ctx, withText(in, at, Message(inv, expanded)))
}

// textOf is the input's text: Content, or the first part's when it has
// parts (the prompt's first block is what the user typed).
func textOf(in agentcontroller.Preparation) (string, int) {
	if in.Parts == nil {
		return in.Content, -1
	}
	if len(in.Parts) > 0 && in.Parts[0].Type == llm.PartText {
		return in.Parts[0].Text, 0
	}
	return "", -1
}

func withText(in agentcontroller.Preparation, at int, text string) agentcontroller.Preparation {
	if at < 0 {
		in.Content = text
		return in
	}
	parts := append([]llm.Part(nil), in.Parts...)
	parts[at].Text = text
	in.Parts = parts
	in.Content = llm.TextOf(parts)
	return in
}

// unknown is the refusal of "/name": what there is instead.
func unknown(name string, all []Command) string {
	if len(all) == 0 {
		return fmt.Sprintf("/%s is not a command: no command files are installed (put NAME.md in .claude/commands or ~/.claude/commands). To send the text as it is, put something before the slash, such as a quote", name)
	}
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = "/" + c.Name
	}
	sort.Strings(names)
	return fmt.Sprintf("/%s is not a command; the commands are %s", name, strings.Join(names, ", "))
}
