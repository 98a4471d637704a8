package main

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/plugins/commands"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/spf13/cobra"
)

// commandPrompt turns --command NAME [ARGS...] into the prompt
// "/NAME ARGS", which the agent's admission stage expands (the
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

// isPromptCommand reports whether line invokes one of agent's prompt
// commands: the interactive session then sends it like any prompt, and
// its own commands (/help, /steer, …) keep their names.
func isPromptCommand(agent agents.Agent, line string) bool {
	inv, ok := commands.Parse(line)
	if !ok {
		return false
	}
	_, known := commands.Find(commands.List(agent.Context(), agent), inv.Name)
	return known
}

// promptCommandsHelp lists agent's prompt commands for /help.
func promptCommandsHelp(agent agents.Agent) string {
	var b strings.Builder
	for _, c := range commands.List(agent.Context(), agent) {
		name := "/" + c.Name
		if c.ArgumentHint != "" {
			name += " " + c.ArgumentHint
		}
		fmt.Fprintf(&b, "%-12s %s\n", name, c.Description)
	}
	return b.String()
}
