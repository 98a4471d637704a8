// Package bash is the tools.bash plugin: the bash tool, which runs a shell
// command in the agent's workspace and returns its output and exit code.
//
// Every command is started through internal/childproc (a minimal
// environment, its own process group, a bounded teardown) and, on Linux,
// inside the sandbox of internal/sandbox: its own user, PID, mount and
// network namespaces, another kernel uid when dsh is root, no
// capabilities, Landlock; writes only beneath the workspace, a temp dir of
// its own and the directories the config adds, the protected paths
// excepted; the network off, on, or through dsh's egress proxy. Where the kernel cannot
// enforce that, sandbox.unavailable decides: refuse every command (the
// default) or run as confined as the kernel allows, with a warning.
//
// With jobs.enabled a command can run in the background (jobs.go): bash
// with background: true starts it the same way and answers at once with a
// job id, and job_output, job_input, job_kill and job_list reach it. A job
// belongs to its agent and dies with the agent's session, the plugin, or
// dsh itself (childproc's group watcher, even after kill -9); its end can
// be reported to the idle agent through the session service (wake.go).
package bash

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/egress"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
)

// probe reads what the kernel offers; tests stand in a kernel without
// Landlock.
var probe = sandbox.Probe

// shells are tried in order: bash where it is installed, else the POSIX
// shell every Unix has.
var shells = []string{"/bin/bash", "/usr/bin/bash", "/bin/sh"}

// Plugin is tools.bash.
var Plugin = plugin.Register("tools.bash", "the bash tool: runs a shell command in the workspace, sandboxed on Linux (namespaces, another uid, Landlock)",
	func(ctx *dshctx.Context, cfg Config) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		r, err := newRunner(cfg, ctx)
		if err != nil {
			return err
		}
		if r.protected, err = protect.Key.Get(ctx); err != nil {
			return err
		}
		if r.egress != nil {
			// The proxy ends with the plugin: every tunnel a command
			// still holds is closed, no goroutine is left behind.
			if _, err := ctx.OnDispose("tools.bash egress proxy", r.egress.Close); err != nil {
				r.egress.Close()
				return err
			}
		}
		// Which agent's bash this is: a preset mounts one per agent, the
		// root one serves all ("").
		who := []any{"agent", ctx.Tag()}
		if ctx.Tag() == "" {
			who = []any{"agent", "all (root)"}
		}
		if r.warning != "" {
			ctx.Logger().Warn("tools.bash: "+r.warning, who...)
		} else {
			ctx.Logger().Info("tools.bash: "+r.summary, who...)
		}
		if cfg.Jobs.Enabled {
			if err := r.mountJobs(ctx, svc); err != nil {
				return err
			}
		}
		return svc.Register(ctx, tools.Tool{
			Name:         "bash",
			Description:  r.description(),
			Parameters:   r.schema(),
			ParallelSafe: false,
			Approval:     tools.Ask,
			ReadOnlyCall: readOnlyCall,
			Execute:      r.execute,
		})
	}, tools.Key, protect.Key)

// runner is one plugin instance: its config and the sandbox it settled
// on when applied.
type runner struct {
	cfg   Config
	shell string
	// sandboxed: commands enter the sandbox at status, weakened no more
	// than accept allows (sandbox.unavailable: warn accepts all).
	sandboxed bool
	status    sandbox.Status
	accept    sandbox.Weaken
	policy    NetworkPolicy
	// guard: commands run without a PID namespace, so childproc's group
	// watcher kills what they leave behind once dsh is gone.
	guard bool
	// egress serves the proxy listener of a proxied command; proxied is
	// set when commands get one (not where the sandbox has no network
	// namespace to put it in, which the warning then names).
	egress  *egress.Proxy
	proxied bool
	// refusal, when set, answers every command (unavailable: refuse).
	refusal string
	// warning says how commands are less confined than configured
	// (unavailable: warn); warned is set once the first result said so.
	warning string
	warned  atomic.Bool
	// summary is the line logged at info: which sandbox is in force.
	summary string
	// protected is the tree's list of protected paths: mounted read-only
	// in every sandbox beside sandbox.read_only.
	protected *protect.List
	// jobs runs commands in the background (jobs.enabled); nil when off.
	jobs *jobManager
}

func newRunner(cfg Config, ctx *dshctx.Context) (*runner, error) {
	policy, err := cfg.Sandbox.Policy()
	if err != nil {
		return nil, fmt.Errorf("tools.bash: %w", err)
	}
	r := &runner{cfg: cfg, policy: policy}
	for _, s := range shells {
		if st, err := os.Stat(s); err == nil && !st.IsDir() {
			r.shell = s
			break
		}
	}
	if r.shell == "" {
		return nil, fmt.Errorf("tools.bash: no shell found at %s; install bash", strings.Join(shells, ", "))
	}
	if cfg.Sandbox.Mode == ModeOff {
		r.guard = true
		r.summary = "sandbox off (sandbox.mode: off): commands run with your full access; what they leave running is killed when they end or dsh goes"
		return r, nil
	}
	if policy.Mode == sandbox.NetworkProxied {
		if ctx != nil { // Describe only reads the settings
			r.egress = newEgress(policy.Egress, ctx)
		}
	}
	r.status = probe()
	names := []string{"the workspace", "a temp dir per command"}
	wanted := r.rules(append(names, cfg.Sandbox.Writable...), nil, nil)
	wanted.ReadOnly = cfg.Sandbox.ReadOnly
	err = r.status.Check(wanted)
	need := r.status.Needed(wanted)
	switch {
	case err == nil:
		r.sandboxed = true
		r.proxied = policy.Mode == sandbox.NetworkProxied
		r.summary = "sandbox: " + r.status.Describe(wanted)
	case cfg.Sandbox.Unavailable == Refuse:
		r.refusal = fmt.Sprintf("the bash tool is off: the sandbox it is configured with cannot be enforced here: %s. "+
			"To run commands anyway, set in the tools.bash config sandbox.unavailable: warn (runs as confined as the kernel allows, with a warning naming what is not isolated)", msg(err))
		if policy.Mode == sandbox.NetworkOff {
			r.refusal += ", sandbox.network: on (lets commands use the network)"
		}
		r.refusal += " or sandbox.mode: off (no sandbox)."
		r.summary = "sandbox unavailable, every command is refused: " + msg(err)
		r.warning = r.summary
	case need&sandbox.NoLandlock != 0 && need&sandbox.NoNamespaces != 0:
		r.guard = true
		r.warning = "NO sandbox (sandbox.unavailable: warn): " + msg(err) + "; commands run with your full access"
	default:
		r.sandboxed, r.accept = true, sandbox.AcceptAll
		r.guard = need&sandbox.NoNamespaces != 0
		r.proxied = policy.Mode == sandbox.NetworkProxied && !r.guard
		r.warning = "sandbox weaker than configured (sandbox.unavailable: warn): " + msg(err) + "; in force: " + r.status.Describe(wanted)
	}
	return r, nil
}

// rules are the sandbox's rules for commands writing beneath writable,
// with the protected paths of readOnly (relative ones beneath the first
// writable directory, the workspace).
func (r *runner) rules(writable, readOnly, hidden []string) sandbox.Rules {
	ro := make([]string, 0, len(readOnly))
	for _, p := range readOnly {
		if !filepath.IsAbs(p) {
			p = filepath.Join(writable[0], p)
		}
		ro = append(ro, p)
	}
	return sandbox.Rules{
		Writable: writable, ReadOnly: ro, Hidden: hidden, Network: r.policy.Mode,
		UID: r.cfg.Sandbox.UID, GID: r.cfg.Sandbox.UID, Accept: r.accept,
		HomeFiles: r.cfg.Sandbox.HomeFiles, UnixSockets: r.cfg.Sandbox.UnixSockets,
	}
}

// msg is an error's message without its code, for people and models.
func msg(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

func (r *runner) description() string {
	var b strings.Builder
	name := "bash"
	if !strings.HasSuffix(r.shell, "bash") {
		name = "sh (bash is not installed)"
	}
	fmt.Fprintf(&b, "Runs a shell command with %s -c in the workspace (the working directory) and returns its output (stdout and stderr interleaved) and exit code. ", name)
	fmt.Fprintf(&b, "stdin is empty: never wait for input. Timeout %s by default, at most %s (argument timeout, in seconds); on timeout the command and every process it started are killed, and background processes are killed when the command ends. ",
		r.cfg.Timeout, r.cfg.MaxTimeout)
	fmt.Fprintf(&b, "Output over %d bytes keeps its first and last %d bytes and says how much was cut: filter long output (grep, head, tail). ", r.cfg.MaxOutputBytes, r.cfg.MaxOutputBytes/2)
	if r.cfg.Jobs.Enabled {
		fmt.Fprintf(&b, "With background: true the command runs as a background job (a dev server, a watcher, a long build) and the call returns at once with its id: "+
			"stdin is then a pipe job_input writes to, job_output reads what it wrote since the last read, job_kill ends it, job_list lists the jobs; "+
			"no timeout unless you give one; at most %d run at once; jobs are killed when the session ends. ", r.cfg.Jobs.MaxRunning)
	}
	switch {
	case r.refusal != "":
		b.WriteString("Unavailable here: every call is refused (the sandbox cannot be enforced).")
	case r.sandboxed:
		b.WriteString("Sandbox: files can be written only inside the workspace and $TMPDIR (a fresh directory per command, removed after)")
		if len(r.cfg.Sandbox.Writable) > 0 {
			b.WriteString(" and " + strings.Join(r.cfg.Sandbox.Writable, ", "))
		}
		if len(r.cfg.Sandbox.ReadOnly) > 0 {
			b.WriteString(", except " + strings.Join(r.cfg.Sandbox.ReadOnly, ", ") + " (read-only)")
		}
		b.WriteString("; reading is allowed everywhere; processes started by a command end with it")
		switch r.policy.Mode {
		case sandbox.NetworkOn:
			b.WriteString("; network allowed.")
		case sandbox.NetworkProxied:
			b.WriteString("; network only through an HTTP(S) proxy (HTTP_PROXY is set) that allows some domains; a refused domain is an error from the proxy.")
		default:
			b.WriteString("; network access is off.")
		}
	default:
		b.WriteString("No sandbox: the command runs with the user's full access.")
	}
	return b.String()
}

func (r *runner) schema() json.RawMessage {
	max := max(int(r.cfg.MaxTimeout/time.Second), 1)
	s := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"command": map[string]any{"type": "string", "minLength": 1, "description": "The command line, run with -c (pipes, &&, redirections allowed)."},
			"timeout": map[string]any{"type": "integer", "minimum": 1, "maximum": max,
				"description": fmt.Sprintf("Seconds before the command is killed; default %d, at most %d.", int(r.cfg.Timeout.Seconds()), max)},
		},
		"required":             []string{"command"},
		"additionalProperties": false,
	}
	if r.cfg.Jobs.Enabled {
		props := s["properties"].(map[string]any)
		props["background"] = map[string]any{"type": "boolean",
			"description": "Run as a background job and return its id at once; timeout then bounds the job's life (none by default)."}
	}
	b, _ := json.Marshal(s)
	return b
}

// args are a call's arguments.
type args struct {
	Command    string `json:"command"`
	Timeout    *int   `json:"timeout"`
	Background bool   `json:"background"`
}

func (r *runner) execute(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
	var a args
	if err := json.Unmarshal(c.Arguments, &a); err != nil || strings.TrimSpace(a.Command) == "" {
		return errorResult("pass a JSON object with a non-empty \"command\" string (and optionally \"timeout\" in seconds)"), nil
	}
	timeout := r.cfg.Timeout
	if a.Timeout != nil {
		limit := int(r.cfg.MaxTimeout / time.Second)
		if *a.Timeout < 1 || *a.Timeout > limit {
			return errorResult(fmt.Sprintf("timeout is %d; give a number of seconds from 1 to %d", *a.Timeout, limit)), nil
		}
		timeout = time.Duration(*a.Timeout) * time.Second
	}
	if r.refusal != "" {
		return errorResult(r.refusal), nil
	}
	ws, problem := workDir(c.Workspace)
	if problem != "" {
		return errorResult(problem), nil
	}
	if a.Background {
		if r.jobs == nil {
			return errorResult("background jobs are off here; set jobs.enabled: true in the tools.bash config, or run the command without background"), nil
		}
		if a.Timeout == nil {
			timeout = 0
		}
		return r.withWarning(r.jobs.start(c, a.Command, ws, timeout)), nil
	}
	return r.withWarning(r.run(ctx, a.Command, ws, timeout)), nil
}

// withWarning puts the sandbox's warning before the first result.
func (r *runner) withWarning(res tools.Result) tools.Result {
	if r.warning != "" && !r.warned.Swap(true) {
		res.Content = "warning: " + r.warning + "\n\n" + res.Content
	}
	return res
}

// workDir is the directory commands run in: the call's workspace as the
// file tools resolve it (dsh's working directory when the agent has none),
// which must exist.
func workDir(call string) (string, string) {
	ws, err := workspace.Dir(call)
	if err != nil {
		return "", msg(err)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return "", fmt.Sprintf("the workspace %q is not an existing directory; fix workspace: in the agent's config", ws)
	}
	return ws, ""
}

func errorResult(s string) tools.Result { return tools.Result{Content: s, IsError: true} }

// Describe is the line tools.bash logs when applied with cfg on this
// machine: which sandbox is in force, or why commands are refused or less
// confined. `dsh config check` prints it.
func Describe(cfg Config) (string, error) {
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	r, err := newRunner(cfg, nil)
	if err != nil {
		return "", err
	}
	if r.policy.Mode == sandbox.NetworkProxied && r.refusal == "" {
		egressLine := "; egress " + r.policy.Egress.String()
		r.summary += egressLine
		if r.warning != "" {
			r.warning += egressLine
		}
	}
	if r.warning != "" {
		return r.warning, nil
	}
	return r.summary, nil
}
