// Package config loads and checks dsh's config file: it reads config.yaml,
// applies DSH_ variables and --set overrides typed by the field they land
// on, decodes each entry's plugin config strictly into the type the plugin
// registered, expands bundle: and mcp_json: entries into entries of dsh's
// own plugins (bundle.go), and reports every problem with its file:line,
// without starting anything. Package host starts what a checked Config describes.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	yamlv3 "go.yaml.in/yaml/v3"
)

// Invalid is the code of every config error.
const Invalid errs.Code = "CONFIG_INVALID"

// Config is the whole config file.
type Config struct {
	// Plugins are mounted on the root: they hear every agent.
	Plugins []Entry `koanf:"plugins"`
	// Presets are named lists of entries mounted in an agent's scope.
	Presets map[string][]Entry `koanf:"presets"`
	// Agents start with the host.
	Agents []AgentConfig `koanf:"agents"`
	Log    LogConfig     `koanf:"log"`
	// ACP configures the sessions `dsh acp` opens for editors.
	ACP ACPConfig `koanf:"acp"`
	// Pricing prices models' tokens, for the usage reports (pricing.go).
	Pricing usage.Pricing `koanf:"pricing"`
	// Goals bounds the back-off between a goal's check-ins (goals.go).
	Goals GoalsConfig `koanf:"goals"`
	// Attachments limits the images and files one message may carry
	// (attachments.max_part_bytes, max_message_bytes).
	Attachments attachments.Limits `koanf:"attachments"`
	// Serve configures `dsh serve`: its listener, auth, webhooks and
	// schedules (serve.go).
	Serve ServeConfig `koanf:"serve"`
	// Cluster joins hosts that share sessions on NATS JetStream
	// (cluster.go); unset, dsh runs alone.
	Cluster ClusterConfig `koanf:"cluster"`
	// Telemetry exports OpenTelemetry traces and metrics (telemetry.go);
	// unset, it is off unless the OTEL_* variables ask for it.
	Telemetry telemetry.Config `koanf:"telemetry"`
	// Limits bound every agent's model responses (llm.Limits); an
	// agent's own limits: win field by field.
	Limits llm.Limits `koanf:"limits"`
	// IgnoreEnvironment turns DSH_ overrides off, as --ignore-env does
	// (see overrideVariables).
	IgnoreEnvironment bool `koanf:"ignore_environment"`

	// File is where the config came from ("" when built in code).
	File string `koanf:"-"`
	// decoded holds each entry's decoded plugin config, by entry.
	decoded map[*Entry]any
	// builtin names the built-in presets in c.Presets.
	builtin map[string]bool
	// spare holds the built-in presets no agent uses, checked and decoded
	// for agents opened later; spareErr the problems of those that cannot
	// be (see addSparePresets).
	spare    map[string][]Entry
	spareErr map[string]string
	// wd is the working directory relative paths started from.
	wd string
	// environ is the environment ${VAR} in bundles' MCP servers reads.
	environ []string
	// bundles reports what each bundle and mcp_json entry mounted.
	bundles []BundleReport
}

// Entry is one plugin to apply.
type Entry struct {
	// ID names the entry; reloads match entries by it. Defaults to Use.
	ID string `koanf:"id"`
	// Use is the id of an in-process plugin.
	Use string `koanf:"use"`
	// Exec is the path of a plugin binary.
	Exec string `koanf:"exec"`
	// SHA256 pins the binary's checksum.
	SHA256 string `koanf:"sha256"`
	// Config is passed to the plugin, decoded into its own config type.
	Config map[string]any `koanf:"config"`
	// Disabled entries are checked but not applied.
	Disabled bool `koanf:"disabled"`
	// Bundle is the folder of a plugin bundle (Claude Code's plugin
	// format): Load replaces the entry with the entries of what the
	// bundle declares (bundle.go).
	Bundle string `koanf:"bundle"`
	// MCPJSON is a project .mcp.json: Load replaces the entry with one
	// tools.mcp entry per server in it.
	MCPJSON string `koanf:"mcp_json"`

	// from is the bundle or mcp_json entry this one was made from.
	from *origin

	// For exec entries only:

	// Timeout bounds each call into the plugin. Unset means
	// DefaultCallTimeout; 0 means no bound.
	Timeout *time.Duration `koanf:"timeout"`
	// StartTimeout bounds the whole start: handshake, Describe and
	// Configure (default 10s).
	StartTimeout time.Duration `koanf:"start_timeout"`
	// OnUnavailable is what the plugin's listeners do while it is down:
	// "fail" (refuse, the default) or "skip" (pass the event on).
	OnUnavailable string `koanf:"on_unavailable"`
	// MaxRestarts bounds the restarts after crashes within RestartWindow
	// (default 5; -1: never restart).
	MaxRestarts int `koanf:"max_restarts"`
	// RestartWindow is how long a crash counts against MaxRestarts and
	// the backoff (default 10m).
	RestartWindow time.Duration `koanf:"restart_window"`
	// Args are passed to the binary, as in exec: /usr/bin/python3 with
	// args: [plugin.py].
	Args []string `koanf:"args"`
	// Env is set in the binary's environment, over the minimal one it
	// gets from dsh (see internal/childproc).
	Env map[string]string `koanf:"env"`
	// EnvPassthrough names variables of dsh's environment the binary may
	// see; no other variable reaches it.
	EnvPassthrough []string `koanf:"env_passthrough"`
	// Optional lets dsh start without the plugin when it fails to start
	// (or its binary is missing): the failure is logged at warn and the
	// entry stays out until the next reload or restart.
	Optional bool `koanf:"optional"`
	// HealthInterval is how often dsh asks the running plugin its gRPC
	// health; unset means execplugin.DefaultHealthInterval.
	HealthInterval time.Duration `koanf:"health_interval"`
	// HealthTimeout bounds one health check; a plugin that does not answer
	// in time is stuck and restarted. Unset means
	// execplugin.DefaultHealthTimeout.
	HealthTimeout time.Duration `koanf:"health_timeout"`
	// Pin lists files besides the binary whose sha256 must match before
	// the plugin starts: the script an interpreter runs, or every file of
	// an installed package.
	Pin []PinnedFile `koanf:"pin"`
}

// PinnedFile is one file an exec: entry's start depends on, with its
// checksum. File resolves like exec: (from the config file's folder).
type PinnedFile struct {
	File   string `koanf:"file"`
	SHA256 string `koanf:"sha256"`
}

// execOnly reports the exec-only settings an entry sets, by key.
func (e *Entry) execOnly() []string {
	var keys []string
	for _, set := range []struct {
		key string
		on  bool
	}{
		{"sha256", e.SHA256 != ""}, {"timeout", e.Timeout != nil}, {"start_timeout", e.StartTimeout != 0},
		{"on_unavailable", e.OnUnavailable != ""}, {"max_restarts", e.MaxRestarts != 0},
		{"restart_window", e.RestartWindow != 0}, {"args", len(e.Args) > 0}, {"env", len(e.Env) > 0},
		{"env_passthrough", len(e.EnvPassthrough) > 0}, {"optional", e.Optional},
		{"health_interval", e.HealthInterval != 0}, {"health_timeout", e.HealthTimeout != 0}, {"pin", len(e.Pin) > 0},
	} {
		if set.on {
			keys = append(keys, set.key)
		}
	}
	return keys
}

// AgentConfig is one agent to start.
type AgentConfig struct {
	ID           string `koanf:"id"`
	Provider     string `koanf:"provider"`
	Model        string `koanf:"model"`
	SystemPrompt string `koanf:"system_prompt"`
	MaxTokens    int    `koanf:"max_tokens"`
	MaxSteps     int    `koanf:"max_steps"`
	// Preset and Presets name presets to mount in the agent's scope, in
	// order (Preset first).
	Preset  string   `koanf:"preset"`
	Presets []string `koanf:"presets"`
	// Session names the agent's session. With a persistence plugin (such
	// as session.jsonl) the agent resumes it when it was persisted, and
	// starts it under that id otherwise; empty means a fresh session each
	// start.
	Session string `koanf:"session"`
	// Workspace is the directory the agent's tools work in: file tools
	// resolve every path inside it, bash runs there. Empty means the
	// directory dsh was started in; a relative path starts from there
	// too. After Load it is absolute and clean.
	Workspace string `koanf:"workspace"`
	// MaxParallelTools caps how many parallel-safe tool calls of one step
	// run at once; 0 means the agent loop's default.
	MaxParallelTools int `koanf:"max_parallel_tools"`
	// Limits bound the agent's model responses; unset fields take the
	// top-level limits:, then llm's defaults. After Load they hold the
	// top-level values merged in.
	Limits llm.Limits `koanf:"limits"`
}

// PresetNames returns the agent's presets in order.
func (a AgentConfig) PresetNames() []string {
	var out []string
	if a.Preset != "" {
		out = append(out, a.Preset)
	}
	return append(out, a.Presets...)
}

// LogConfig sets up logging.
type LogConfig struct {
	// Level is trace, debug, info, warn or error (default info).
	Level string `koanf:"level"`
	// JSON writes log lines as JSON.
	JSON bool `koanf:"json"`
}

// LoadOptions say where the config comes from and what overrides it.
type LoadOptions struct {
	// Path is the file (the --config flag). Empty means $DSH_CONFIG, else
	// ./config.yaml.
	Path string
	// Environ is the environment to read DSH_ overrides from (os.Environ()
	// when nil).
	Environ []string
	// Sets are --set key.path=value overrides, applied last.
	Sets []string
	// Dir is the directory relative paths start from, and the default
	// workspace (the working directory when empty).
	Dir string
	// IgnoreEnv reads neither DSH_CONFIG nor DSH_ overrides (the
	// --ignore-env flag): whoever sets dsh's environment can add an exec:
	// plugin, so an operator who does not trust it turns it off. Variables
	// the config names itself (serve.token_env, a webhook's secret_env) are
	// still read.
	IgnoreEnv bool
}

// ResolvePath returns the config file Load would read.
func ResolvePath(opts LoadOptions) string {
	if opts.Path != "" {
		return opts.Path
	}
	if opts.IgnoreEnv {
		return "config.yaml"
	}
	if p := lookupEnv(opts.environ(), "DSH_CONFIG"); p != "" {
		return p
	}
	return "config.yaml"
}

func (o LoadOptions) environ() []string {
	if o.Environ == nil {
		return os.Environ()
	}
	return o.Environ
}

func lookupEnv(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Load reads, overrides, decodes and checks the config. Every problem is
// reported at once in one CONFIG_INVALID error whose lines name the file,
// the line, the key path and what was expected.
func Load(opts LoadOptions) (*Config, error) {
	path := ResolvePath(opts)
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, errs.New(Invalid, fmt.Sprintf(
				"config file %q not found: pass --config FILE, set DSH_CONFIG, or create ./config.yaml", path))
		}
		return nil, errs.Wrap(Invalid, err, fmt.Sprintf("cannot read config file %q", path))
	}
	return Parse(path, data, opts)
}

// Parse is Load for config text already in memory; file names it in errors.
func Parse(file string, data []byte, opts LoadOptions) (*Config, error) {
	k := koanf.New("\x00") // no key splitting: overrides address lists too
	if err := k.Load(rawbytes.Provider(data), yaml.Parser()); err != nil {
		return nil, errs.Wrap(Invalid, err, fmt.Sprintf("%s: not valid YAML", file))
	}
	raw := k.Raw()
	p := &problems{file: file, data: data, sources: map[string]string{}}

	for _, kv := range overrideVariables(raw, opts) {
		name, value, _ := strings.Cut(kv, "=")
		segs := strings.Split(strings.ToLower(strings.TrimPrefix(name, "DSH_")), "__")
		source := "environment variable " + name
		at, err := override(raw, segs, value, source)
		if err != nil {
			p.addf("", "%s: %v", source, err)
			continue
		}
		p.sources[normalPath(at)] = source
	}
	for _, set := range opts.Sets {
		key, value, ok := strings.Cut(set, "=")
		if !ok || key == "" {
			p.addf("", "--set %q: write key.path=value", set)
			continue
		}
		source := "--set " + key
		at, err := override(raw, strings.Split(key, "."), value, source)
		if err != nil {
			p.addf("", "%s: %v", source, err)
			continue
		}
		p.sources[normalPath(at)] = source
	}

	cfg := &Config{File: file, environ: opts.environ()}
	decodeStrict(raw, cfg, "", p, true)
	if !p.empty() {
		return nil, p.err()
	}
	dir, err := opts.workingDir()
	if err != nil {
		return nil, errs.Wrap(Invalid, err, "cannot tell the working directory, where the workspaces start")
	}
	cfg.check(p, dir)
	if !p.empty() {
		return nil, p.err()
	}
	return cfg, nil
}

// check validates what decoding cannot: ids, references and each entry's
// plugin config.
func (c *Config) check(p *problems, dir string) {
	c.decoded = map[*Entry]any{}
	c.wd = dir
	c.checkCluster(p)
	c.checkTelemetry(p)
	if err := c.Limits.Check("limits"); err != nil {
		p.add("limits", err.Error())
	}
	c.bundles = nil
	c.Plugins = c.expandBundles(c.Plugins, "plugins", p)
	c.checkEntries(c.Plugins, "plugins", p)
	var names []string // the presets the file defines
	for name := range c.Presets {
		names = append(names, name)
	}
	sort.Strings(names)
	c.addBuiltinPresets()
	for _, name := range slices.Sorted(maps.Keys(c.Presets)) {
		at := "presets." + name
		if c.builtin[name] {
			// Not in the file: a line number would point at another key.
			at = "built-in preset " + name
		}
		if !c.builtin[name] {
			c.Presets[name] = c.expandBundles(c.Presets[name], at, p)
		}
		c.checkEntries(c.Presets[name], at, p)
	}
	c.addSparePresets(p)
	seen, sessions := map[string]int{}, map[string]int{}
	for i := range c.Agents {
		a := &c.Agents[i]
		at := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.ID == "":
			p.add(at, "the agent has no id; add id: <name>")
		case seen[a.ID] > 0:
			p.add(at+".id", fmt.Sprintf("agent id %q is used twice (also agents[%d]); ids must be unique", a.ID, seen[a.ID]-1))
		}
		seen[a.ID] = i + 1
		if a.Provider == "" {
			p.add(at, "the agent has no provider; set provider: to a model provider such as scripted")
		}
		for j, name := range a.PresetNames() {
			if _, ok := c.Presets[name]; !ok {
				key := at + ".preset"
				if a.Preset == "" || j > 0 {
					key = fmt.Sprintf("%s.presets[%d]", at, j-boolInt(a.Preset != ""))
				}
				p.add(key, fmt.Sprintf("preset %q is not defined; defined presets: %s; built-in: %s", name, orNone(names), strings.Join(builtinNames(), ", ")))
			}
		}
		if a.MaxTokens < 0 || a.MaxSteps < 0 {
			p.add(at, "max_tokens and max_steps cannot be negative")
		}
		if a.MaxParallelTools < 0 {
			p.add(at+".max_parallel_tools", "max_parallel_tools cannot be negative; 0 means the default cap")
		}
		if err := a.Limits.Check(at + ".limits"); err != nil {
			p.add(at+".limits", err.Error())
		}
		a.Limits = c.Limits.Over(a.Limits)
		resolveWorkspace(a, at, dir, p)
		switch {
		case a.Session == "":
		case !session.ValidID(a.Session):
			p.add(at+".session", fmt.Sprintf("session id %q is not a session id: use %s", a.Session, session.IDRule))
		case sessions[a.Session] > 0:
			p.add(at+".session", fmt.Sprintf("session %q is also agents[%d]'s; two agents cannot share a session", a.Session, sessions[a.Session]-1))
		default:
			sessions[a.Session] = i + 1
		}
	}
	c.checkReferences(p)
	c.noteBundleWorkspaces()
	c.checkStores(p)
	c.checkPricing(p)
	c.checkGoals(p)
	c.checkServe(p)
	if c.Attachments.PerPart < 0 || c.Attachments.PerMessage < 0 {
		p.add("attachments", "max_part_bytes and max_message_bytes cannot be negative; leave them out for the defaults (10 MiB a part, 20 MiB a message)")
	}
	switch strings.ToLower(c.Log.Level) {
	case "", "trace", "debug", "info", "warn", "error", "off":
	default:
		p.add("log.level", fmt.Sprintf("%q is not a log level; use trace, debug, info, warn, error or off", c.Log.Level))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *Config) checkEntries(list []Entry, at string, p *problems) {
	// What overrides put in a config map reaches plugins as plain values;
	// typed configs have taken theirs by now.
	defer func() {
		for i := range list {
			resolveUntyped(list[i].Config)
		}
	}()
	seen := map[string]int{}
	for i := range list {
		e := &list[i]
		key := fmt.Sprintf("%s[%d]", at, i)
		if e.from != nil {
			key = e.from.key
		}
		if e.ID == "" {
			e.ID = e.Use
			if e.ID == "" {
				e.ID = e.Exec
			}
		}
		if j, dup := seen[e.ID]; dup && e.ID != "" {
			p.add(key+".id", fmt.Sprintf("entry id %q is used twice in %s (also %s[%d]); give each entry its own id", e.ID, at, at, j))
		}
		seen[e.ID] = i
		switch {
		case e.Use != "" && e.Exec != "":
			p.add(key, "an entry has either use: (an in-process plugin) or exec: (a plugin binary), not both")
		case e.Use == "" && e.Exec == "":
			p.add(key, "the entry names no plugin; add use: <plugin id> (see dsh plugins), exec: <binary>, bundle: <folder> or mcp_json: <file>")
		case e.Exec != "":
			written := e.Exec
			e.Exec = c.ExecPath(e.Exec)
			checkExec(e, c.where(written), key, p)
			for j := range e.Pin {
				written := e.Pin[j].File
				if written != "" {
					e.Pin[j].File = c.ExecPath(written)
				}
				checkPin(e.Pin[j], c.where(written), fmt.Sprintf("%s.pin[%d]", key, j), p)
			}
		default:
			if keys := e.execOnly(); len(keys) > 0 {
				list := strings.Join(keys, ", ")
				if n := len(keys); n > 1 {
					list = strings.Join(keys[:n-1], ", ") + " and " + keys[n-1]
				}
				p.add(key, fmt.Sprintf("%s: for exec: entries only; remove from this use: entry", list))
			}
			info, ok := plugin.Lookup(e.Use)
			if !ok {
				msg := fmt.Sprintf("unknown plugin %q", e.Use)
				if near := nearest(e.Use); near != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", near)
				}
				p.add(key+".use", msg+"; registered plugins: "+strings.Join(registeredIDs(), ", "))
				continue
			}
			if info.Config == nil {
				if len(e.Config) > 0 {
					p.add(key+".config", fmt.Sprintf("plugin %q takes no config; remove the config key", e.Use))
				}
				continue
			}
			out := info.Config()
			before := len(p.list)
			decodeStrict(e.Config, out, key+".config", p, false)
			if pc, ok := out.(usage.PricedConfig); ok {
				pc.UsePricing(c.Pricing)
			}
			if v, ok := out.(interface{ Validate() error }); ok && len(p.list) == before {
				if err := v.Validate(); err != nil {
					// A plugin may say which key inside its config is at
					// fault (a rule of policy.cel), for its line.
					at, msg := key+".config", messageOf(err)
					var pe interface{ ConfigPath() string }
					if errors.As(err, &pe) && pe.ConfigPath() != "" {
						at += "." + pe.ConfigPath()
						if u := errors.Unwrap(pe.(error)); u != nil {
							msg = u.Error()
						}
					}
					p.add(at, msg)
				}
			}
			if len(p.list) == before {
				c.decoded[e] = out
			}
		}
	}
}

// messageOf is an error's text without its code, for a config problem line.
func messageOf(err error) string {
	if e, ok := err.(*errs.Error); ok && e.Cause == nil {
		return e.Message
	}
	return err.Error()
}

// checkExec validates an exec: entry: the binary, its checksum and the
// supervision settings.
func checkExec(e *Entry, where, key string, p *problems) {
	// A missing binary of an optional entry is not a problem: dsh starts
	// without it, says why, and dsh config check marks it.
	switch st, err := os.Stat(e.Exec); {
	case err != nil && !e.Optional:
		p.add(key+".exec", fmt.Sprintf("plugin binary %s not found; build it or fix the path", where))
	case err == nil && (st.IsDir() || st.Mode()&0o111 == 0):
		p.add(key+".exec", fmt.Sprintf("plugin binary %s is not an executable file; chmod +x it", where))
	}
	if e.SHA256 != "" {
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
			p.add(key+".sha256", "expected 64 hex digits, the output of sha256sum")
		}
	}
	switch e.OnUnavailable {
	case "", "fail", "skip":
	default:
		p.add(key+".on_unavailable", fmt.Sprintf("%q is not an option; use fail or skip", e.OnUnavailable))
	}
	if (e.Timeout != nil && *e.Timeout < 0) || e.StartTimeout < 0 || e.MaxRestarts < -1 {
		p.add(key, "timeout and start_timeout cannot be negative; max_restarts is -1 (never restart) or more")
	}
	if e.HealthInterval < 0 || e.HealthTimeout < 0 {
		p.add(key, "health_interval and health_timeout cannot be negative (defaults 10s and 2s)")
	}
	if e.RestartWindow < 0 {
		p.add(key+".restart_window", "restart_window cannot be negative; it is how long a crash counts against max_restarts (default 10m)")
	}
	for _, name := range slices.Sorted(maps.Keys(e.Env)) {
		if !envName.MatchString(name) {
			p.add(key+".env", fmt.Sprintf("%q is not an environment variable name; use letters, digits and '_', not starting with a digit", name))
		}
	}
	for i, name := range e.EnvPassthrough {
		if !envName.MatchString(name) {
			p.add(fmt.Sprintf("%s.env_passthrough[%d]", key, i), fmt.Sprintf("%q is not an environment variable name; list names only, such as GITHUB_TOKEN", name))
		}
	}
}

var envName = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// PluginConfig returns the decoded config of an entry checked by Load.
func (c *Config) PluginConfig(e *Entry) any { return c.decoded[e] }

func registeredIDs() []string {
	var ids []string
	for _, info := range plugin.List() {
		ids = append(ids, info.ID)
	}
	return ids
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// decodeStrict decodes in into out; unknown keys and wrong types become
// problems at their key path under at.
//
// Override values are decoded by the type of the field they land on; keep
// leaves those landing in untyped slots for a later, typed decode.
func decodeStrict(in any, out any, at string, p *problems, keep bool) {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:      out,
		TagName:     "koanf",
		ErrorUnused: true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.DecodeHookFuncType(overrideHook(keep)),
			mapstructure.StringToTimeDurationHookFunc()),
		// Squash lets plugin configs embed shared option structs.
		Squash: true,
	})
	if err != nil {
		p.add(at, err.Error())
		return
	}
	if err := dec.Decode(in); err != nil {
		// mapstructure walks a map in Go's random order; the problems of
		// one decode are put in file order so a report reads the same
		// every time.
		start := len(p.list)
		defer func() { p.sortFrom(start) }()
		for _, d := range decodeErrors(err) {
			key := joinPath(at, d.name)
			inner := d.err
			if oe, ok := errors.AsType[*overrideError](inner); ok {
				p.addFrom(oe.source, key, oe.msg)
				continue
			}
			var msg string
			switch e := inner.(type) {
			case *mapstructure.UnconvertibleTypeError:
				msg = fmt.Sprintf("expected %s, got %s", describeType(e.Expected.Type()), describeValue(e.Value))
			case *mapstructure.ParseError:
				msg = fmt.Sprintf("expected %s, got %s", describeType(e.Expected.Type()), describeValue(e.Value))
			default:
				text := inner.Error()
				if keys, ok := strings.CutPrefix(text, "has invalid keys: "); ok {
					allowed := allowedKeys(reflect.TypeOf(out), d.name)
					for _, k := range strings.Split(keys, ", ") {
						p.add(joinPath(key, k), fmt.Sprintf("unknown key %q; expected one of: %s", k, strings.Join(allowed, ", ")))
					}
					continue
				}
				msg = text
			}
			p.add(key, msg)
		}
	}
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}

type leaf struct {
	name string
	err  error
}

// decodeErrors flattens mapstructure's joined errors into their leaves.
func decodeErrors(err error) []leaf {
	var out []leaf
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				walk(inner)
			}
		case *mapstructure.DecodeError:
			switch x.Unwrap().(type) {
			case interface{ Unwrap() []error }, *mapstructure.DecodeError:
				walk(x.Unwrap())
				return
			}
			out = append(out, leaf{x.Name(), x.Unwrap()})
		case interface{ Unwrap() error }:
			walk(x.Unwrap()) // "decoding failed due to the following error(s)"
		default:
			out = append(out, leaf{"", e})
		}
	}
	walk(err)
	return out
}

// allowedKeys lists the koanf keys of the struct found at path in t.
func allowedKeys(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, seg := range splitPath(path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Slice, reflect.Map:
			// A map key or list index names an element, not a field.
			t = t.Elem()
			continue
		case reflect.Struct:
			if f, ok := fieldByTag(t, seg); ok {
				t = f.Type
			}
		}
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	var keys []string
	collectKeys(t, &keys)
	sort.Strings(keys)
	return keys
}

func collectKeys(t reflect.Type, keys *[]string) {
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && (opts == "squash" || tag == "") {
			collectKeys(f.Type, keys)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		*keys = append(*keys, tag)
	}
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if tag == name {
			return f, true
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if g, ok := fieldByTag(f.Type, name); ok {
				return g, true
			}
		}
	}
	return reflect.StructField{}, false
}

// splitPath splits "agents[0].provider" into agents, [0], provider.
func splitPath(path string) []string {
	var out []string
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			i := strings.Index(part, "[")
			switch {
			case i < 0:
				out = append(out, part)
				part = ""
			case i == 0:
				j := strings.Index(part, "]")
				if j < 0 {
					out = append(out, part)
					part = ""
					continue
				}
				out = append(out, part[:j+1])
				part = part[j+1:]
			default:
				out = append(out, part[:i])
				part = part[i:]
			}
		}
	}
	return out
}

var durationType = reflect.TypeOf(time.Duration(0))

func describeType(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s or 1m"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping of keys to values"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return t.String()
}

func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case int, int64, float64, uint64:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}

// problems collects config errors.
type problems struct {
	file  string
	data  []byte
	lines lineIndex // built on the first problem: a good config never pays for it
	list  []string
	// sources maps the key paths that overrides set to the flag or
	// variable that set them: a problem there is theirs, not the file's.
	sources map[string]string
}

func (p *problems) add(path, msg string) {
	if source := p.sourceOf(path); source != "" {
		p.addFrom(source, path, msg)
		return
	}
	if p.lines == nil {
		p.lines = newLineIndex(p.data)
	}
	loc := p.file
	if line := p.lines.line(path); line > 0 {
		loc = fmt.Sprintf("%s:%d", p.file, line)
	}
	if path != "" {
		p.list = append(p.list, fmt.Sprintf("%s: %s: %s", loc, path, msg))
		return
	}
	p.list = append(p.list, fmt.Sprintf("%s: %s", loc, msg))
}

// addFrom adds a problem in a value an override set, named by its source.
func (p *problems) addFrom(source, path, msg string) {
	p.list = append(p.list, fmt.Sprintf("%s: %s: %s", source, path, msg))
}

// sourceOf returns the override that set path or one of its ancestors.
func (p *problems) sourceOf(path string) string {
	for path = normalPath(path); path != ""; {
		if s, ok := p.sources[path]; ok {
			return s
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return ""
}

// sortFrom puts the problems from index start on in the order of their
// lines in the file; those without a line (an override's) keep their
// order after them.
func (p *problems) sortFrom(start int) {
	line := func(s string) int {
		rest, ok := strings.CutPrefix(s, p.file+":")
		if !ok {
			return math.MaxInt
		}
		n, _, _ := strings.Cut(rest, ":")
		if v, err := strconv.Atoi(n); err == nil {
			return v
		}
		return math.MaxInt
	}
	sort.SliceStable(p.list[start:], func(i, j int) bool { return line(p.list[start+i]) < line(p.list[start+j]) })
}

func (p *problems) addf(path, format string, args ...any) { p.add(path, fmt.Sprintf(format, args...)) }

func (p *problems) empty() bool { return len(p.list) == 0 }

func (p *problems) err() error {
	noun := "problem"
	if len(p.list) > 1 {
		noun = "problems"
	}
	e := errs.New(Invalid, fmt.Sprintf("%d config %s:\n  %s", len(p.list), noun, strings.Join(p.list, "\n  ")))
	e.Details = map[string]any{"problems": p.list}
	return e
}

// lineIndex maps key paths ("agents[0].provider") to YAML line numbers.
type lineIndex map[string]int

func newLineIndex(data []byte) lineIndex {
	var doc yamlv3.Node
	idx := lineIndex{}
	if yamlv3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return idx
	}
	var walk func(n *yamlv3.Node, path string)
	walk = func(n *yamlv3.Node, path string) {
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := joinPath(path, n.Content[i].Value)
				idx[key] = n.Content[i].Line
				walk(n.Content[i+1], key)
			}
		case yamlv3.SequenceNode:
			for i, el := range n.Content {
				key := fmt.Sprintf("%s[%d]", path, i)
				idx[key] = el.Line
				walk(el, key)
			}
		}
	}
	walk(doc.Content[0], "")
	return idx
}

// line returns the line of path or of its nearest ancestor that has one.
func (l lineIndex) line(path string) int {
	path = normalPath(path) // map keys: models[gpt-4.1] is models.gpt-4.1
	for path != "" {
		if n, ok := l[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return 0
}
