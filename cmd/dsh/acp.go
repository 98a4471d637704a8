package main

import (
	stdctx "context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/acp"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/spf13/cobra"
)

// acpCommand serves the Agent Client Protocol on stdin/stdout for an
// editor. stdout carries protocol messages only: the host, its plugins
// and the server log to stderr.
func acpCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "acp",
		Short: "serve the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, Emacs…)",
		Long: `acp makes dsh an ACP agent: the editor starts it and talks JSON-RPC over
stdin/stdout. Each editor session is an agent opened from the acp: key of the
config (agent: the configured agent to start from, default the first;
presets: added to its own; mode: the starting mode, default workspace-write).
Logs go to stderr. It exits 0 when the editor closes stdin (and stdout too,
if it does), after every session's agent is stopped and its session saved.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serveACP(cmd, g) },
	}
}

func serveACP(cmd *cobra.Command, g *globals) error {
	// An editor that goes away closes stdout too: dsh's answers then hit
	// a closed pipe, which must fail the write, not kill dsh before its
	// sessions are saved.
	defer catchSIGPIPE()()
	stderr := cmd.ErrOrStderr()
	cfg, err := config.Load(g.loadOptions())
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	agent := cfg.ACP.Agent
	if agent == "" {
		if len(cfg.Agents) == 0 {
			return &exitCode{code: exitUsage, err: fmt.Errorf("dsh acp opens its sessions from a configured agent, and the config has none; add one under agents: (and name it in acp.agent)")}
		}
		agent = cfg.Agents[0].ID
	} else if _, ok := cfg.Agent(agent); !ok {
		return &exitCode{code: exitUsage, err: fmt.Errorf("acp.agent: no agent %q; configured agents: %s", agent, strings.Join(cfg.AgentIDs(), ", "))}
	}
	switch cfg.ACP.Mode {
	case "", acp.ModeReadOnly, acp.ModeWorkspaceWrite, acp.ModeFullAccess, acp.ModePlan:
	default:
		return &exitCode{code: exitUsage, err: fmt.Errorf("acp.mode: %q is not a mode; use read-only, workspace-write, full-access or plan (plan needs tools.plan)", cfg.ACP.Mode)}
	}
	for i, name := range cfg.ACP.Presets {
		if _, err := cfg.Preset(name); err != nil {
			return &exitCode{code: exitUsage, err: fmt.Errorf("acp.presets[%d]: %w", i, err)}
		}
	}
	h, err := host.Start(cfg, host.Options{LogOutput: stderr})
	if err != nil {
		return &exitCode{code: exitError, err: err}
	}
	ctx, stop := signal.NotifyContext(stdctx.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, hasMCP := plugin.Lookup("tools.mcp")
	serveErr := acp.Serve(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), acp.Options{
		Sessions: h.Sessions(), Agent: agent, Presets: cfg.ACP.Presets, Mode: cfg.ACP.Mode,
		Version: dshVersion(), MCP: hasMCP, User: osUser(), Accepts: acceptsOf(h, cfg, agent), Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slogLevel(cfg.Log.Level)})),
	})
	cctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	closeErr := h.Close(cctx)
	switch {
	case serveErr != nil:
		return &exitCode{code: exitError, err: fmt.Errorf("closing the ACP sessions: %w", serveErr)}
	case closeErr != nil:
		return &exitCode{code: exitError, err: fmt.Errorf("shutdown: %w", closeErr)}
	}
	return nil
}

// dshVersion is the version part of versionText's first line.
func dshVersion() string {
	first, _, _ := strings.Cut(versionText(), "\n")
	if f := strings.Fields(first); len(f) > 1 {
		return f[1]
	}
	return "(devel)"
}

func slogLevel(level string) slog.Level {
	switch level {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error", "off":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// acceptsOf says what the configured agent's model takes beyond text, so
// an editor is offered images only where they can reach the model. A
// provider mounted by a preset is not known before a session opens: such
// an agent is offered text only, which its provider refuses nothing of.
func acceptsOf(h *host.Host, cfg *config.Config, agent string) parts.Capabilities {
	ac, ok := cfg.Agent(agent)
	if !ok {
		return parts.Capabilities{}
	}
	svc, err := llm.Key.Get(h.Root())
	if err != nil {
		return parts.Capabilities{}
	}
	p, ok := svc.Provider(ac.Provider)
	if !ok {
		return parts.Capabilities{}
	}
	model := ac.Model
	if model == "" {
		model = cfg.DefaultModel(ac.Provider)
	}
	return parts.Of(p, model)
}
