// Package host turns a checked config into a running tree and keeps it
// running: it mounts the core services, applies the configured plugins —
// in-process ones by id from package plugin, binaries through package
// execplugin — and reloads them when the config changes. It starts no
// agent of its own: agents are opened through the session controller
// (Sessions), whose opener is OpenAgent, the one operation that builds an
// agent with its presets and workspace. Package config loads and checks
// the file.
package host

import (
	stdctx "context"
	"errors"
	"fmt"
	"github.com/dsh-go/dsh/telemetry/provider"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// StartFailed is the code of a config that decoded but could not be applied.
const StartFailed errs.Code = "HOST_START_FAILED"

// Options tune a Host.
type Options struct {
	// LogOutput receives the logs (stderr when nil).
	LogOutput io.Writer
	// Logger replaces the logger built from the config's log settings.
	Logger hclog.Logger
	// StopTimeout bounds, in a Reload whose ctx has no deadline, each
	// stop of a plugin and the hold of the admission stage during the
	// plugin swap; 0 means DefaultStopTimeout.
	StopTimeout time.Duration
	// ApproverGrace is how long an approval question waits for an
	// answerer when none is attached: a first one (approval's
	// SetAttachGrace) or an approving client coming back
	// (live.Options.ApproverGrace); 0, for runs with nobody to wait for,
	// refuses at once. dsh serve sets serve.approver_grace.
	ApproverGrace time.Duration
}

// Host is a running config: the tree, its plugins and the agents opened
// in it.
type Host struct {
	root       *dshctx.Context
	log        hclog.Logger
	registry   *agents.Registry
	controller *agentcontroller.Controller
	tools      *tools.Service
	models     *llm.Service
	sessions   *sessions.Controller
	// attachments keeps the bytes of message parts; attachmentsDir is
	// where ("" in memory).
	attachments    *attachments.Store
	attachmentsDir string

	stopTimeout   time.Duration
	approverGrace time.Duration
	// base is the ordering position after the core services: a root
	// entry put first on reload goes after them, as at start.
	base int64

	// mu guards the state below and is only ever held for a read or an
	// update of it, never across a plugin's or an agent's start or stop,
	// so Close and the getters never wait behind a slow reload.
	mu      sync.Mutex
	cfg     *config.Config
	plugins []*mounted
	// presetCatalog holds the catalog copies of the presets' session
	// stores (catalog.go), nil until first needed; presetStores are those
	// the root's own backend does not answer for. catalogMu serializes
	// the mounts.
	presetCatalog *dshctx.Fiber
	presetStores  storeUnion
	catalogMu     sync.Mutex
	// opened are the agents callers opened (OpenAgent), by id: theirs to
	// dispose, Close's if they do not.
	opened map[string]*openedAgent
	closed bool

	// reloading serializes reloads (write lock) and keeps OpenAgent, which
	// takes it for reading, on one config generation.
	reloading sync.RWMutex
	// stagesClosed, under reloading, releases the holds that keep the
	// admission and approval stages refusing every message and call since
	// a reload failed and could not restore each plugin it had stopped:
	// the stages lack deciders the config names until a reload succeeds.
	stagesClosed func()

	// reloaded is closed by the next Reload. It has its own lock, taken
	// only to swap the channel.
	// telemetry is the provider this host installed and shuts down; nil
	// when telemetry is off or another host of the process owns it.
	telemetry *provider.Provider

	reloadMu sync.Mutex
	reloaded chan struct{}
}

type mounted struct {
	entry config.Entry
	fiber *dshctx.Fiber
	exec  *execplugin.Plugin // for exec: entries
	// order is the ordering key of a root entry: its listeners run at its
	// config position among the root entries, also once restarted.
	order int64
}

// Start builds the tree for cfg: the core services, the agent controller and
// loop, the session controller, then the root plugins in order. It opens no
// agent: the config's agents are templates that sessions open (Sessions).
// On any failure everything started is disposed and the error says which
// entry failed.
func Start(cfg *config.Config, opts Options) (*Host, error) {
	logger := opts.Logger
	if logger == nil {
		out := opts.LogOutput
		if out == nil {
			out = os.Stderr
		}
		logger = hclog.New(&hclog.LoggerOptions{
			Name: "dsh", Output: out, JSONFormat: cfg.Log.JSON,
			Level: hclog.LevelFromString(orDefault(cfg.Log.Level, "info")),
		})
	}
	tel, err := startTelemetry(cfg, logger)
	if err != nil {
		return nil, err
	}
	root := dshctx.New(dshctx.WithLogger(logger))
	h := &Host{telemetry: tel, root: root, log: logger, cfg: cfg, opened: map[string]*openedAgent{}, reloaded: make(chan struct{}), stopTimeout: opts.StopTimeout, approverGrace: opts.ApproverGrace}
	if h.stopTimeout <= 0 {
		h.stopTimeout = DefaultStopTimeout
	}
	store, dir, err := openAttachments(cfg)
	if err != nil {
		return nil, errors.Join(errs.Wrap(StartFailed, err, "the attachments store cannot be opened"), root.Dispose(stdctx.Background()), tel.Shutdown(stdctx.Background()))
	}
	h.attachments, h.attachmentsDir = store, dir
	if err := h.mountCore(); err != nil {
		return nil, errors.Join(err, root.Dispose(stdctx.Background()), tel.Shutdown(stdctx.Background()))
	}
	logBundleNotes(logger, cfg)
	if err := h.protectLoaded(cfg); err != nil {
		return nil, errors.Join(err, root.Dispose(stdctx.Background()), tel.Shutdown(stdctx.Background()))
	}
	for i := range cfg.Plugins {
		e := &cfg.Plugins[i]
		if e.Disabled {
			continue
		}
		m, err := h.applyAt(root, cfg, e, fmt.Sprintf("plugins[%d]", i), waterfall.Position())
		if err != nil {
			return nil, errors.Join(err, root.Dispose(stdctx.Background()), tel.Shutdown(stdctx.Background()))
		}
		h.plugins = append(h.plugins, m)
	}
	// The logs are readable now: drop what a crash left in the store
	// before any session can add to it.
	h.collectAttachments()
	return h, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (h *Host) mountCore() error {
	if err := core.Mount(h.root); err != nil {
		return err
	}
	// The loop prices model requests for the dsh.cost metric.
	loop := agentloop.Config{Pricing: h.Config().Pricing, DefaultModel: h.Config().DefaultModel}
	for _, p := range []struct {
		plugin dshctx.Plugin
		cfg    any
	}{{agentcontroller.Plugin, nil}, {agentloop.Plugin, loop}, {attachments.Provided(h.attachments), nil}} {
		f, err := h.root.Plugin(p.plugin, p.cfg)
		if err != nil {
			return err
		}
		if err := f.Await(stdctx.Background()); err != nil {
			return err
		}
	}
	// The session controller: the one way entry points open agents.
	f, err := h.root.Plugin(sessions.Plugin, h.sessionOptions())
	if err != nil {
		return err
	}
	if err := f.Await(stdctx.Background()); err != nil {
		return err
	}
	h.registry, _ = agents.Key.Get(h.root)
	h.controller, _ = agentcontroller.Key.Get(h.root)
	h.tools, _ = tools.Key.Get(h.root)
	h.models, _ = llm.Key.Get(h.root)
	h.sessions, _ = sessions.Key.Get(h.root)
	if svc, err := approval.Key.Get(h.root); err == nil {
		// A question asked before any answerer attached (a session this
		// host took over, its server not yet attached) waits this long.
		svc.SetAttachGrace(h.approverGrace)
	}
	h.base = waterfall.Position()
	return nil
}

// apply mounts one entry in ctx and waits for it.
func (h *Host) apply(ctx *dshctx.Context, cfg *config.Config, e *config.Entry, at string) (*mounted, error) {
	return h.applyAt(ctx, cfg, e, at, 0)
}

// applyAt is apply with the entry's ordering key (see dshctx.Fiber.Order).
func (h *Host) applyAt(ctx *dshctx.Context, cfg *config.Config, e *config.Entry, at string, order int64) (*mounted, error) {
	var p dshctx.Plugin
	var ep *execplugin.Plugin
	if e.Exec != "" {
		ep = execplugin.New(*e)
		p = ep
	} else {
		info, ok := plugin.Lookup(e.Use)
		if !ok {
			return nil, errs.New(StartFailed, fmt.Sprintf("%s: plugin %q is not registered", at, e.Use))
		}
		p = info.Plugin
	}
	f, err := ctx.PluginAt(order, p, cfg.PluginConfig(e))
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		if f != nil {
			// A fiber that failed to apply has nothing left to undo but
			// what Apply registered before failing; its errors join.
			err = errors.Join(err, f.Dispose(stdctx.Background()))
		}
		what := "use " + e.Use
		if e.Exec != "" {
			what = "exec " + e.Exec
		}
		return nil, errs.Wrap(StartFailed, err, fmt.Sprintf("%s (id %q, %s) failed to start", at, e.ID, what))
	}
	h.log.Debug("plugin started", "at", at, "id", e.ID, "use", e.Use, "scope", ctx.Tag())
	return &mounted{entry: *e, fiber: f, exec: ep, order: order}, nil
}

// agentOptions are the settings of the agent's loop. The workspace is
// absolute by now: config resolved it against the working directory.
func agentOptions(ac config.AgentConfig) agents.Options {
	return agents.Options{
		Provider: ac.Provider, Model: ac.Model, SystemPrompt: ac.SystemPrompt, MaxTokens: ac.MaxTokens, MaxSteps: ac.MaxSteps,
		Workspace: ac.Workspace, MaxParallelTools: ac.MaxParallelTools, Limits: ac.Limits,
	}
}

// Root returns the root context.
func (h *Host) Root() *dshctx.Context { return h.root }

// Logger returns the host's logger.
func (h *Host) Logger() hclog.Logger { return h.log }

// Controller returns the agent controller, the way in for every message.
func (h *Host) Controller() *agentcontroller.Controller { return h.controller }

// Config returns the running config.
func (h *Host) Config() *config.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// Agent returns a running agent by its registered id, whoever opened it.
func (h *Host) Agent(id string) (agents.Agent, bool) { return h.registry.Get(id) }

// PluginFiber returns the fiber of the root entry with id, for status and
// tests.
func (h *Host) PluginFiber(id string) (*dshctx.Fiber, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.plugins {
		if m.entry.ID == id {
			return m.fiber, true
		}
	}
	return nil, false
}

// ExecPlugin returns the plugin binary of the root exec: entry with id, for
// status and tests.
func (h *Host) ExecPlugin(id string) (*execplugin.Plugin, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.plugins {
		if m.entry.ID == id && m.exec != nil {
			return m.exec, true
		}
	}
	return nil, false
}

// Close disposes the agents callers opened and still hold (their turns
// end, sessions flush), then the whole tree, all bounded by ctx. It returns every failure joined: an agent
// that did not stop, a disposer that failed (a plugin's final write), or
// the CONTEXT_INACTIVE error of a teardown ctx cut short, which goes on in
// the background. It does not wait for a reload in progress: that reload
// stops at its next step, and what it started goes with the tree.
func (h *Host) Close(ctx stdctx.Context) error {
	h.mu.Lock()
	h.closed = true
	opened := make([]*agents.Handle, 0, len(h.opened))
	for _, id := range slices.Sorted(maps.Keys(h.opened)) {
		opened = append(opened, h.opened[id].handle)
	}
	h.mu.Unlock()
	var failed []error
	for _, handle := range opened {
		if err := handle.Dispose(ctx); err != nil {
			failed = append(failed, err)
		}
	}
	if err := h.root.Dispose(ctx); err != nil {
		failed = append(failed, err)
	}
	// Last, so the spans of the teardown (session flushes) are exported.
	if err := h.telemetry.Shutdown(ctx); err != nil {
		failed = append(failed, errs.Wrap(errs.Internal, err, "telemetry: flushing the last spans and metrics failed"))
	}
	return errors.Join(failed...)
}

// Describe renders the resolved plugin tree of cfg: root plugins, presets
// and agents, for dsh config check.
func Describe(cfg *config.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s\n", orDefault(cfg.File, "(built in)"))
	b.WriteString("root plugins (hear every agent):\n")
	if len(cfg.Plugins) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, e := range cfg.Plugins {
		b.WriteString("  " + describeEntry(e) + "\n")
	}
	if len(cfg.Presets) > 0 {
		b.WriteString("presets:\n")
		names := make([]string, 0, len(cfg.Presets))
		for n := range cfg.Presets {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if cfg.BuiltinPresetInUse(n) {
				b.WriteString("  " + n + " (built-in):\n")
			} else {
				b.WriteString("  " + n + ":\n")
			}
			for _, e := range cfg.Presets[n] {
				b.WriteString("    " + describeEntry(e) + "\n")
			}
		}
	}
	describeBundles(&b, cfg.Bundles())
	var unused []string
	for _, p := range config.BuiltinPresets() {
		if _, ok := cfg.Presets[p.Name]; !ok {
			unused = append(unused, p.Name)
		}
	}
	if len(unused) > 0 {
		fmt.Fprintf(&b, "built-in presets, unused (dsh presets shows them): %s\n", strings.Join(unused, ", "))
	}
	b.WriteString("agents:\n")
	if len(cfg.Agents) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, a := range cfg.Agents {
		fmt.Fprintf(&b, "  %s  provider=%s", a.ID, a.Provider)
		if a.Model != "" {
			fmt.Fprintf(&b, " model=%s", a.Model)
		}
		if ps := a.PresetNames(); len(ps) > 0 {
			fmt.Fprintf(&b, " presets=%s", strings.Join(ps, ","))
		}
		if a.Session != "" {
			fmt.Fprintf(&b, " session=%s", a.Session)
		}
		if a.MaxParallelTools > 0 {
			fmt.Fprintf(&b, " max_parallel_tools=%d", a.MaxParallelTools)
		}
		fmt.Fprintf(&b, "\n    workspace %s\n", a.Workspace)
	}
	return b.String()
}

func describeEntry(e config.Entry) string {
	s := e.ID
	if e.Use != "" && e.Use != e.ID {
		s += " (use " + e.Use + ")"
	}
	if e.Exec != "" && e.Exec != e.ID {
		s += " (exec " + strings.Join(append([]string{e.Exec}, e.Args...), " ") + ")"
	}
	if from := e.From(); from != "" {
		s += " (from " + from + ")"
	}
	if e.Disabled {
		s += " [disabled]"
	}
	if e.Optional {
		s += " [optional: dsh starts without it if it fails to start"
		if _, err := os.Stat(e.Exec); err != nil {
			s += "; its binary is missing, so it will"
		}
		s += "]"
	}
	return s
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
