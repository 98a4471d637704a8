// Command dsh runs the agents described in a config file.
//
//	dsh run                      interactive session with the first agent
//	dsh run -p "prompt"          one turn, answer on stdout, then exit
//	dsh run --session ID         resume session ID (or create it); --continue: the latest
//	dsh config check             validate the config and print its plugin tree
//	dsh plugins                  list the plugins compiled in
//	dsh plugins check PATH       start a plugin binary, print what it declares
//	dsh presets                  list the built-in presets (the modes)
//	dsh sessions list|show|rm    the persisted sessions, with their usage
//	dsh sessions verify SESSION  check a session's decision records (and signatures)
//	dsh replay SESSION...        re-run recorded sessions against a changed config
//
// Exit codes: 0 the turn completed, 1 it failed, 2 bad usage or config,
// 3 admission refused the prompt, 4 the answer hit the token limit, 130
// interrupted. A reader that closes stdout early changes no code (run.go).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/nodump"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/spf13/cobra"
)

// Exit codes of dsh.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitRefused     = 3
	exitMaxTokens   = 4
	exitInterrupted = 130
)

// exitError carries an exit code out of a command.
type exitCode struct {
	code int
	err  error
}

func (e *exitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func main() {
	// Before anything secret is read: a child dsh starts outside the
	// sandbox, as dsh's own user, must not read it back from /proc.
	if err := nodump.Seal(); err != nil {
		fmt.Fprintln(os.Stderr, "dsh: warning:", err)
	}
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// globals are the flags every command shares.
type globals struct {
	config   string
	logLevel string
	logJSON  bool
	sets     []string
	// ignoreEnv: read no DSH_ variable as config (see config.LoadOptions).
	ignoreEnv bool
}

func (g *globals) loadOptions() config.LoadOptions {
	sets := append([]string(nil), g.sets...)
	if g.logLevel != "" {
		sets = append(sets, "log.level="+g.logLevel)
	}
	if g.logJSON {
		sets = append(sets, "log.json=true")
	}
	return config.LoadOptions{Path: g.config, Sets: sets, IgnoreEnv: g.ignoreEnv}
}

func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{}
	root := &cobra.Command{
		Use:           "dsh",
		Short:         "dsh runs AI agents from a config file, with plugins",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionText(),
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.config, "config", "", "config file (default $DSH_CONFIG, else ./config.yaml)")
	pf.StringVar(&g.logLevel, "log-level", "", "log level: trace, debug, info, warn, error, off")
	pf.BoolVar(&g.logJSON, "log-json", false, "write logs as JSON lines")
	pf.BoolVar(&g.ignoreEnv, "ignore-env", false, "read no DSH_ variable as config: neither DSH_CONFIG nor DSH_ overrides")
	pf.StringArrayVar(&g.sets, "set", nil, "override a config key, e.g. --set agents.main.model=deepseek-chat (repeatable)")

	root.AddCommand(runCommand(g), configCommand(g), withPluginsCheck(pluginsCommand(), g), presetsCommand(), acpCommand(g), sessionsCommand(g), serveCommand(g), clusterCommand(g), replayCommand(g))

	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ec *exitCode
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintln(stderr, "dsh:", ec.err)
		}
		return ec.code
	}
	fmt.Fprintln(stderr, "dsh:", err)
	return exitUsage
}

func configCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "inspect the config"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "validate the config and print the resolved plugin tree, without starting agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(g.loadOptions())
			if err != nil {
				return &exitCode{code: exitUsage, err: err}
			}
			fmt.Fprint(cmd.OutOrStdout(), host.Describe(cfg))
			fmt.Fprint(cmd.OutOrStdout(), describeSandbox(cfg))
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	})
	return cmd
}

func pluginsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "plugins",
		Short: "list the in-process plugins compiled into this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			width := 0
			for _, info := range plugin.List() {
				width = max(width, len(info.ID))
			}
			for _, info := range plugin.List() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-*s  %s\n", width, info.ID, strings.TrimSpace(info.Doc))
			}
			var names []string
			for _, p := range config.BuiltinPresets() {
				names = append(names, p.Name)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nbuilt-in presets (dsh presets shows what they mount): %s\n", strings.Join(names, ", "))
			return nil
		},
	}
}
