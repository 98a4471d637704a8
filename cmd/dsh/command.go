package main

import (
	stdctx "context"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/plugins/commands"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/spf13/cobra"
)

// commandPrompt turns --command NAME [ARGS...] into the prompt
// "/NAME ARGS", which the agent controller's prepare stage expands (the
// prompt.commands plugin) as it expands the same line typed anywhere else.
func (f *runFlags) commandPrompt(cmd *cobra.Command, args []string) error {
	if f.command == "" {
		if len(args) > 0 {
			return &exitCode{code: exitUsage, err: fmt.Errorf("dsh run takes no arguments (%q); send a prompt with -p, or run a prompt command with --command NAME %s", args[0], strings.Join(args, " "))}
		}
		return nil
	}
	if cmd.Flags().Changed("prompt") {
		return &exitCode{code: exitUsage, err: fmt.Errorf("--command and -p both give the prompt; use one of them")}
	}
	line := "/" + strings.TrimPrefix(f.command, "/")
	if _, ok := commands.Parse(line); !ok || strings.ContainsAny(f.command, " \t") {
		return &exitCode{code: exitUsage, err: fmt.Errorf("--command %q is not a command name; give the name of a command file without .md, such as review-pr, then its arguments", f.command)}
	}
	if len(args) > 0 {
		line += " " + strings.Join(args, " ")
	}
	f.prompt = line
	return nil
}

// isPromptCommand reports whether line invokes one of the session's
// prompt commands: the interactive session then sends it like any prompt,
// and its own commands (/help, /steer, …) keep their names.
func isPromptCommand(list []sessions.PromptCommand, line string) bool {
	inv, ok := commands.Parse(line)
	if !ok {
		return false
	}
	for _, c := range list {
		if c.Name == inv.Name {
			return true
		}
	}
	return false
}

// promptCommandsHelp lists the session's prompt commands for /help.
func promptCommandsHelp(list []sessions.PromptCommand) string {
	var b strings.Builder
	for _, c := range list {
		name := "/" + c.Name
		if c.ArgumentHint != "" {
			name += " " + c.ArgumentHint
		}
		fmt.Fprintf(&b, "%-12s %s\n", name, c.Description)
	}
	return b.String()
}

// sessionCommands is the session's prompt commands, none when it cannot
// say (the line is then the CLI's to judge).
func sessionCommands(svc sessions.Service, id string) []sessions.PromptCommand {
	list, _ := svc.Commands(stdctx.Background(), id)
	return list
}
