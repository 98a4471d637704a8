package hooks

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// Config is the plugin's configuration: hooks from files, inline hooks,
// and how their commands run.
type Config struct {
	// Files are JSON files in Claude Code's settings format: an object
	// whose "hooks" key maps event names to matcher groups. Other keys
	// (permissions, env, ...) are ignored, so a .claude/settings.json can
	// be named as it is. Relative paths start from the directory dsh was
	// started in, like the config's other paths. Files are read once, when
	// the plugin is applied (and at config check): a hook the agent writes
	// into one later does not run until the config is reloaded.
	Files []string `koanf:"files" json:"files,omitempty"`
	// Hooks are inline hooks, the same event map as a file's "hooks" key.
	Hooks map[string][]Group `koanf:"hooks" json:"hooks,omitempty"`
	// Timeout bounds a hook that sets no timeout of its own.
	Timeout time.Duration `koanf:"timeout" json:"timeout,omitempty"`
	// MaxStopContinuations bounds how many times Stop hooks may keep one
	// turn going; after that the turn ends and the block is logged.
	MaxStopContinuations int `koanf:"max_stop_continuations" json:"max_stop_continuations,omitempty"`
	// MaxOutputBytes caps what is kept of a hook's stdout and of its
	// stderr; the rest is counted and dropped.
	MaxOutputBytes int `koanf:"max_output_bytes" json:"max_output_bytes,omitempty"`
	// Env is set for every hook, over the minimal environment and over
	// the "env" keys of Files (Claude Code's settings set those variables
	// for the session, so its hooks see them).
	Env map[string]string `koanf:"env" json:"env,omitempty"`
	// EnvPassthrough names variables of dsh's environment hooks may see.
	EnvPassthrough []string `koanf:"env_passthrough" json:"env_passthrough,omitempty"`
}

// Group is a matcher and the hooks that run when it matches.
type Group struct {
	// Matcher selects tools by name for PreToolUse, PostToolUse and
	// PostToolUseFailure (see
	// the package doc), and the source (startup, resume, compact) for
	// SessionStart, as in Claude Code; "", "*" or none matches all.
	// UserPromptSubmit and Stop ignore it.
	Matcher string `koanf:"matcher" json:"matcher,omitempty"`
	Hooks   []Hook `koanf:"hooks" json:"hooks"`
}

// Hook is one command.
type Hook struct {
	// Type is "command" (or empty). Other hook types of Claude Code
	// (prompt, http, ...) are skipped with a warning.
	Type string `koanf:"type" json:"type,omitempty"`
	// Command is run by bash -c in the agent's workspace.
	Command string `koanf:"command" json:"command"`
	// Timeout is in seconds, as in Claude Code; 0 means the plugin's.
	Timeout float64 `koanf:"timeout" json:"timeout,omitempty"`
}

// DefaultTimeout is Claude Code's for a command hook that sets none (600
// seconds; it was 60 before), so a slow hook written for it (a Stop hook
// that runs the tests) is not cut short here.
const DefaultTimeout = 10 * time.Minute

// Defaults: Claude Code's timeout per hook, five forced continuations per
// turn, 64 KiB of each output stream.
func (Config) Defaults() Config {
	return Config{Timeout: DefaultTimeout, MaxStopContinuations: 5, MaxOutputBytes: 64 << 10}
}

// Validate reads the files and checks every hook, so config check reports
// a missing file, bad JSON, an unknown event or a bad matcher.
// maxHookTimeout bounds a hook's own timeout.
const maxHookTimeout = 24 * time.Hour

func (c Config) Validate() error {
	_, err := c.load()
	return err
}

// The events dsh runs, and the Claude Code events it reads and skips.
const (
	PreToolUse  = "PreToolUse"
	PostToolUse = "PostToolUse"
	// PostToolUseFailure runs, as in Claude Code, after a call whose
	// result is an error; PostToolUse after the others.
	PostToolUseFailure = "PostToolUseFailure"
	UserPromptSubmit   = "UserPromptSubmit"
	Stop               = "Stop"
	SessionStart       = "SessionStart"
	// PreCompact runs before a compaction summarizes the history, with
	// trigger manual or auto (which its matchers select).
	PreCompact = "PreCompact"
	// SessionEnd runs when the agent is disposed, reason "other".
	SessionEnd = "SessionEnd"
	// SubagentStart and SubagentStop run for tools.agent's children:
	// when one starts, and when its turn would end (Stop's part for a
	// subagent). Their matchers select the subagent's name.
	SubagentStart = "SubagentStart"
	SubagentStop  = "SubagentStop"
	// Notification runs when a person is asked to approve a call
	// (notification_type permission_prompt, which its matchers select).
	Notification = "Notification"
	// PermissionRequest runs when a call would ask a person, and may
	// answer for them (allow or deny).
	PermissionRequest = "PermissionRequest"
)

var supported = []string{PreToolUse, PostToolUse, PostToolUseFailure, UserPromptSubmit, Stop, SessionStart, PreCompact, SessionEnd, SubagentStart, SubagentStop, Notification, PermissionRequest}

// skipped are Claude Code events dsh has no stage for (yet): a file that
// has them still loads, and each is reported once as a warning. Only a
// name Claude Code does not know fails the load: a settings file written
// for a newer Claude Code must not be refused whole for one event.
var skipped = []string{
	"PermissionDenied", "Setup", "InstructionsLoaded", "TaskCreated", "TaskCompleted",
	"StopFailure", "TeammateIdle", "PostCompact", "Elicitation", "ElicitationResult",
	"WorktreeCreate", "WorktreeRemove", "ConfigChange", "CwdChanged", "FileChanged",
}

// compiled is one runnable hook with where it came from.
type compiled struct {
	event   string
	where   string // "file.json: hooks.PreToolUse[0].hooks[1]" or "hooks.PreToolUse[0].hooks[1]"
	match   matcher
	command string
	timeout time.Duration
}

// loaded is a config read: runnable hooks by event, the variables the
// files' "env" keys set, and warnings about what was skipped.
type loaded struct {
	byEvent  map[string][]compiled
	env      map[string]string
	warnings []string
}

// load turns the config into runnable hooks by event, and the warnings
// about what it skips.
func (c Config) load() (loaded, error) {
	var problems, warnings []string
	out := map[string][]compiled{}
	env := map[string]string{}
	if c.Timeout <= 0 {
		problems = append(problems, fmt.Sprintf("timeout is %s; set a positive duration such as 60s", c.Timeout))
	}
	if c.MaxStopContinuations < 0 {
		problems = append(problems, fmt.Sprintf("max_stop_continuations is %d; set 0 (Stop hooks never continue a turn) or more", c.MaxStopContinuations))
	}
	if c.MaxOutputBytes < 256 {
		problems = append(problems, fmt.Sprintf("max_output_bytes is %d; set at least 256", c.MaxOutputBytes))
	}
	add := func(origin string, events map[string][]Group) {
		for _, event := range slices.Sorted(maps.Keys(events)) {
			groups := events[event]
			switch {
			case slices.Contains(skipped, event):
				warnings = append(warnings, fmt.Sprintf("%shooks.%s: dsh has no %s event; these hooks do not run", origin, event, event))
				continue
			case !slices.Contains(supported, event):
				problems = append(problems, fmt.Sprintf("%shooks.%s: unknown event; expected one of %s", origin, event, strings.Join(supported, ", ")))
				continue
			}
			for gi, g := range groups {
				at := fmt.Sprintf("%shooks.%s[%d]", origin, event, gi)
				m, err := compileMatcher(g.Matcher)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s.matcher: %v", at, err))
					continue
				}
				if why := neverRuns(event, g.Matcher, m); why != "" {
					warnings = append(warnings, fmt.Sprintf("%s.matcher: %q %s", at, g.Matcher, why))
				}
				if why := differs(event, g.Matcher); why != "" {
					warnings = append(warnings, fmt.Sprintf("%s.matcher: %q %s", at, g.Matcher, why))
				}
				for hi, h := range g.Hooks {
					hat := fmt.Sprintf("%s.hooks[%d]", at, hi)
					switch {
					case h.Type != "" && h.Type != "command":
						warnings = append(warnings, fmt.Sprintf("%s: type %q is not supported (only command hooks run); skipped", hat, h.Type))
						continue
					case strings.TrimSpace(h.Command) == "":
						problems = append(problems, hat+".command: empty; give the shell command to run")
						continue
					case h.Timeout < 0:
						problems = append(problems, fmt.Sprintf("%s.timeout: %v; give seconds (> 0) or leave it out for the default", hat, h.Timeout))
						continue
					case h.Timeout > maxHookTimeout.Seconds():
						// Larger values overflow a time.Duration into a
						// negative one, which would time the hook out at once.
						problems = append(problems, fmt.Sprintf("%s.timeout: %v seconds is more than the most a hook may run (%v); give at most %.0f", hat, h.Timeout, maxHookTimeout, maxHookTimeout.Seconds()))
						continue
					}
					if strings.Contains(h.Command, "CLAUDE_ENV_FILE") {
						warnings = append(warnings, fmt.Sprintf("%s.command: uses CLAUDE_ENV_FILE, which dsh does not set: variables a hook writes there do not reach the agent's bash commands, as they do in Claude Code; set them in the config's env or the agent's", hat))
					}
					timeout := c.Timeout
					if h.Timeout > 0 {
						timeout = time.Duration(h.Timeout * float64(time.Second))
					}
					out[event] = append(out[event], compiled{event: event, where: hat, match: m, command: h.Command, timeout: timeout})
				}
			}
		}
	}
	type file struct {
		name string
		doc  settings
		data []byte
	}
	var files []file
	off := ""
	for _, f := range c.Files {
		doc, data, err := readFile(f)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		files = append(files, file{f, doc, data})
		if w := permissionWarning(f, data); w != "" {
			warnings = append(warnings, w)
		}
		if off == "" && disabled(data) {
			off = f
		}
	}
	for _, f := range files {
		if off != "" {
			// Claude Code runs no hooks at all then; the config's own
			// (inline) hooks are dsh's, not a settings file's, and run.
			warnings = append(warnings, fmt.Sprintf("%s: its hooks do not run: %s sets \"disableAllHooks\": true, with which Claude Code runs none", f.name, off))
			maps.Copy(env, f.doc.vars())
			continue
		}
		add(f.name+": ", f.doc.Hooks)
		warnings = append(warnings, keyWarnings(f.name+": ", f.data)...)
		maps.Copy(env, f.doc.vars())
	}
	warnings = append(warnings, unlisted(c.Files)...)
	// A plugin's hooks read CLAUDE_PLUGIN_ROOT, which Claude Code sets for
	// them (and a bundle: entry sets in env); copied into a settings file
	// or the config, the command finds it empty.
	if _, set := env["CLAUDE_PLUGIN_ROOT"]; !set && c.Env["CLAUDE_PLUGIN_ROOT"] == "" {
		for _, event := range slices.Sorted(maps.Keys(out)) {
			for _, h := range out[event] {
				if strings.Contains(h.command, "CLAUDE_PLUGIN_ROOT") {
					warnings = append(warnings, fmt.Sprintf("%s.command: uses CLAUDE_PLUGIN_ROOT, which is set only for a plugin's hooks (mount the plugin with a bundle: entry) and is empty here", h.where))
				}
			}
		}
	}
	add("", c.Hooks)
	if len(problems) > 0 {
		sort.Strings(problems)
		return loaded{warnings: warnings}, errs.New(errs.InvalidArgument, "hooks: "+strings.Join(problems, "; "))
	}
	return loaded{byEvent: out, env: env, warnings: warnings}, nil
}

// settings is what dsh reads of a Claude Code settings file: its hooks,
// and its "env", the variables Claude Code sets for the session and so
// for every hook it runs.
type settings struct {
	Hooks map[string][]Group `json:"hooks"`
	Env   map[string]any     `json:"env"`
}

// vars are the settings' env as variables: strings as they are, numbers
// and booleans written out; anything else is not a value a variable can
// hold and is left out.
func (s settings) vars() map[string]string {
	out := map[string]string{}
	for k, v := range s.Env {
		switch v.(type) {
		case string, float64, bool:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// readFile reads the "hooks" and "env" keys of a Claude Code settings
// file.
func readFile(name string) (settings, []byte, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		abs, _ := filepath.Abs(name)
		return settings{}, nil, fmt.Errorf("files: cannot read %s (%s): %v; relative paths start from the directory dsh was started in", name, abs, unwrapPathErr(err))
	}
	var doc settings
	if err := json.Unmarshal(data, &doc); err != nil {
		return settings{}, nil, fmt.Errorf("%s: not a hooks file: %v; expected {\"hooks\": {\"PreToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"...\"}]}]}}", name, err)
	}
	if doc.Hooks == nil && !disabled(data) {
		return settings{}, nil, fmt.Errorf("%s: has no \"hooks\" key; expected {\"hooks\": {\"PreToolUse\": [...], ...}}", name)
	}
	return doc, data, nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// simpleMatcher is a matcher made only of names and |: matched exactly.
var simpleMatcher = lazyregexp.New(`^[A-Za-z0-9_|-]+$`)
