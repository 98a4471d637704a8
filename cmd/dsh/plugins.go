package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
)

// withPluginsCheck adds `check` under `dsh plugins`.
func withPluginsCheck(plugins *cobra.Command, g *globals) *cobra.Command {
	plugins.AddCommand(pluginsCheckCommand(g))
	return plugins
}

// checkFlags are the flags of `dsh plugins check`.
type checkFlags struct {
	json    bool
	timeout time.Duration
	config  string
	env     []string
	python  string
}

func pluginsCheckCommand(g *globals) *cobra.Command {
	f := &checkFlags{}
	cmd := &cobra.Command{
		Use:   "check [flags] PATH [ARGS...]",
		Short: "start a plugin binary (or a Python script) as dsh would, print what it declares, and stop it",
		Long: `check starts PATH as an exec: entry would start it — the same environment,
handshake, Describe and Configure — prints its name, version, SDK, protocol
version, the seams it listens to, its tools with their schemas and the
capabilities it requires, and stops it. A PATH ending in .py runs with the
interpreter --python names (python3 on PATH by default; write the one
the config's exec: names). ARGS go to the plugin as an entry's args: would.
Exit status: 0 the plugin would start, 1 it would not (the error says why),
2 bad usage.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPluginsCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), g, f, args)
		},
	}
	// Flags after PATH belong to the plugin.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVar(&f.json, "json", false, "print a JSON object instead of text")
	cmd.Flags().DurationVar(&f.timeout, "timeout", execplugin.DefaultStartTimeout, "bound the start (handshake, Describe, Configure), as start_timeout does")
	cmd.Flags().StringVar(&f.config, "plugin-config", "", `the entry's config: as JSON, e.g. '{"word": "password"}'`)
	cmd.Flags().StringVar(&f.python, "python", "python3", "the interpreter that runs a .py PATH")
	cmd.Flags().StringArrayVar(&f.env, "env", nil, "NAME=value for the plugin's environment, as an entry's env: (repeatable)")
	return cmd
}

// checkEntry is the exec: entry that check starts for PATH and ARGS.
func checkEntry(f *checkFlags, args []string) (config.Entry, error) {
	path, err := filepath.Abs(args[0])
	if err != nil {
		return config.Entry{}, err
	}
	e := config.Entry{ID: strings.TrimSuffix(filepath.Base(path), ".py"), Exec: path, Args: args[1:], StartTimeout: f.timeout, Env: map[string]string{}}
	if strings.HasSuffix(path, ".py") {
		// A script is what the interpreter runs; dsh's config names the
		// interpreter in exec: and the script in args:, and so does this.
		python, err := exec.LookPath(f.python)
		if err != nil {
			return e, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("checking a .py plugin runs it with %s, which was not found; name the interpreter with --python", f.python))
		}
		if python, err = filepath.Abs(python); err != nil {
			return e, err
		}
		e.Exec, e.Args = python, append([]string{path}, args[1:]...)
	}
	if f.config != "" {
		if err := json.Unmarshal([]byte(f.config), &e.Config); err != nil {
			return e, errs.Wrap(errs.InvalidArgument, err, `--plugin-config must be a JSON object, such as '{"word": "password"}'`)
		}
	}
	for _, kv := range f.env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return e, errs.New(errs.InvalidArgument, fmt.Sprintf("--env %q: write NAME=value", kv))
		}
		e.Env[name] = value
	}
	return e, nil
}

func runPluginsCheck(stdout, stderr io.Writer, g *globals, f *checkFlags, args []string) error {
	e, err := checkEntry(f, args)
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	level := hclog.Warn
	if g.logLevel != "" {
		level = hclog.LevelFromString(g.logLevel)
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "plugins check", Output: stderr, Level: level, JSONFormat: g.logJSON})
	ctx, stop := signal.NotifyContext(stdctx.Background(), os.Interrupt)
	defer stop()
	checked, err := execplugin.Check(ctx, e, log)
	r := newCheckReport(e, checked, err)
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if werr := enc.Encode(r); werr != nil {
			return werr
		}
		if err != nil {
			return &exitCode{code: exitError}
		}
		return nil
	}
	r.print(stdout)
	if err != nil {
		return &exitCode{code: exitError, err: err}
	}
	return nil
}
