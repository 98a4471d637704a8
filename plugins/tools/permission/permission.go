// Package permission is the tools.permission plugin: a policy on the
// approval stage (tools/approve) that allows, denies or asks about each tool
// call before it runs. Mounted in a preset it governs one agent; on the
// root, all of them.
//
// # Rules
//
// A rule matches a call when its tool, command and path all match: tool is
// a name or a glob over names ("*", "mcp_*"); command (bash only) is a
// pattern for one simple command, word by word, where a last word * stands
// for any further words ("git *" matches git, git status and git push -f;
// "git status" matches only git status); path (tools with a path argument:
// path, file_path, dir, directory, paths) is a doublestar pattern relative
// to the workspace ("**/.env", "docs/**"), or absolute when it starts
// with /. The first rule that matches decides. Before the rules come the
// old lists: a tool in deny is denied, and when allow is set a tool outside
// it is denied; after them, the tools in allow are allowed.
//
// # Modes
//
// mode decides a call no rule matches: read-only allows ReadTools and
// denies everything else; workspace-write allows ReadTools and FileTools
// (which are confined to the workspace), asks before every bash command and
// leaves other tools to their default; full-access allows everything.
// With no mode, a call no rule matches is left to the policies mounted
// after this one and, last, to the tool's own default (bash asks).
//
// # Bash
//
// A bash command line is parsed (package shell) and each simple command is
// judged on its own: `git status && rm -rf ~` is two commands, and so are
// the commands of pipes, lists, subshells, $(...) and `...` inside an
// argument. The strictest decision wins (deny over ask over allow). Words
// are expanded as far as possible without running anything: quotes and
// backslashes removed, $'...' decoded, braces expanded; a glob may become
// any file names it matches, and a word known only at run time ($X, $(cmd))
// any word, or any number of words outside double quotes. The first rule
// a command surely matches decides, but a rule before it that the command
// could match once expanded is held against it when it denies or asks: an
// allow rule never covers more than it names, and a deny rule meets every
// command it might turn out to be.
//
// Code known only at run time is opaque: a program named at run time,
// eval of a variable, a shell reading a pipe, source of a process
// substitution, a script file the same line may write, BASH_ENV. It meets
// every rule that denies or asks, so a deny stays a deny whatever answers
// the asks (--yolo, --allow bash); with no such rule it is asked about
// (allowed in full-access, denied in read-only). Known code a command runs
// is judged too: the script of sh -c and eval, a trap's action, a here-
// string fed to a shell, an alias, and the tails of a wrapper's words
// (sudo -u bob rm -rf / meets "rm *"), where only rules that deny or ask
// count. A wrapper or a shell running a file is decided by a rule naming it
// or taking every command, else asked about. A line that cannot be parsed
// is opaque, and denied with the parser's message failing a rule.
// Redirections that write a file count in the modes: read-only denies
// them, workspace-write asks unless the file is inside the workspace.
// This is a policy, not a sandbox: a script file written earlier or an
// interpreter (python -c) the rules do not name runs code the policy does
// not read; the sandbox of tools.bash is what confines a command that runs.
//
// # Several policies
//
// When the plugin is mounted on the root and in a preset, a Deny from any
// of them wins; otherwise the outermost policy that has a matching rule or
// a mode decides: the root's (registered with waterfall.Prepend, so it
// stays outermost across reloads), then the presets' in the order applied.
// A hooks.command PreToolUse hook inside a policy is heard as if it ran
// first: its allow skips the policy's mode ask (not a rule's), its ask
// stands over the policy's allow (see Prompt). Each verdict's Source names the
// rule that decided ("tools.permission:rules[2]"), and an ask about bash
// carries the programs asked about as its Pattern, so "allow for this
// session" covers git, not every command.
package permission

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// ID is the plugin's id, and the start of the Source of its verdicts.
const ID = "tools.permission"

// Plugin is tools.permission.
var Plugin = plugin.Register(ID, "allows, denies or asks about tool calls by tool, bash command and path, or by mode", func(ctx *dshctx.Context, cfg Config) error {
	source := ID
	if tag := ctx.Tag(); tag != "" {
		source += "@" + tag
	}
	p, err := newPolicy(cfg, source)
	if err != nil {
		return err
	}
	// The root's policy goes first whenever it was applied, so a reload
	// of the root does not hand the last word to the presets.
	var opts []waterfall.Option
	if ctx.Tag() == "" {
		opts = append(opts, waterfall.Prepend)
	}
	_, err = tools.EventApprove.On(ctx, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		return p.approve(ctx, a, next)
	}, opts...)
	return err
})
