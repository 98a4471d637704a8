package mcp

import (
	"fmt"
	"strings"
	"time"

	"github.com/dsh-go/dsh/internal/lazyregexp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What to do with a server that does not start.
const (
	// Fail makes dsh's start (or the preset's agent creation) fail.
	Fail = "fail"
	// Skip starts without the server, logs why with its stderr tail, and
	// keeps trying to start it in the background.
	Skip = "skip"
)

// Config is one MCP server.
type Config struct {
	// Name is the server's name in tool names (name__tool).
	Name string `koanf:"name" json:"name"`

	// Command, Args, Env, EnvPassthrough and Cwd start a stdio server.
	Command        string            `koanf:"command" json:"command,omitempty"`
	Args           []string          `koanf:"args" json:"args,omitempty"`
	Env            map[string]string `koanf:"env" json:"env,omitempty"`
	EnvPassthrough []string          `koanf:"env_passthrough" json:"env_passthrough,omitempty"`
	// Cwd is the server's working directory; relative paths start from
	// the directory dsh runs in, like the config's other paths.
	Cwd string `koanf:"cwd" json:"cwd,omitempty"`

	// URL, Headers and BearerTokenEnv reach a streamable HTTP server.
	URL     string            `koanf:"url" json:"url,omitempty"`
	Headers map[string]string `koanf:"headers" json:"headers,omitempty"`
	// BearerTokenEnv names the variable of dsh's environment holding the
	// token sent as "Authorization: Bearer"; read at each connect.
	BearerTokenEnv string `koanf:"bearer_token_env" json:"bearer_token_env,omitempty"`

	// StartTimeout bounds one start: the process (or the HTTP session)
	// up, initialize answered, tools listed.
	StartTimeout time.Duration `koanf:"start_timeout" json:"start_timeout,omitempty"`
	// CallTimeout bounds one tool call; the server is told to cancel it.
	CallTimeout time.Duration `koanf:"call_timeout" json:"call_timeout,omitempty"`
	// OnUnavailable is fail or skip (see the constants).
	OnUnavailable string `koanf:"on_unavailable" json:"on_unavailable,omitempty"`
	// MaxResultBytes caps the text of one result; the rest is cut with a
	// note.
	MaxResultBytes int `koanf:"max_result_bytes" json:"max_result_bytes,omitempty"`
	// MaxMessageBytes bounds one message from a stdio server (default
	// 16 MiB). A result over it is answered as an error result ("result
	// too large") and the server keeps running.
	MaxMessageBytes int `koanf:"max_message_bytes" json:"max_message_bytes,omitempty"`

	// Approval, when set (allow, ask, deny), is every tool's default
	// verdict instead of the one derived from its annotations.
	Approval string `koanf:"approval" json:"approval,omitempty"`
	// ParallelSafe lists tools (the server's own names, or "*") that may
	// run beside other parallel-safe calls even without readOnlyHint.
	ParallelSafe []string `koanf:"parallel_safe" json:"parallel_safe,omitempty"`

	// RestartBackoff is the first wait before restarting a server that
	// went away; it doubles up to RestartBackoffMax and starts over once
	// a server stayed up for RestartStable.
	RestartBackoff    time.Duration `koanf:"restart_backoff" json:"restart_backoff,omitempty"`
	RestartBackoffMax time.Duration `koanf:"restart_backoff_max" json:"restart_backoff_max,omitempty"`
	RestartStable     time.Duration `koanf:"restart_stable" json:"restart_stable,omitempty"`

	// transport, when set, replaces command and url (tests and benchmarks
	// reach in-memory servers this way).
	transport func() (mcpsdk.Transport, error)
}

// Defaults: 10s to start, 60s per call, fail when the server never
// starts, 64 KiB of result text, restarts from 500ms up to 30s.
func (Config) Defaults() Config {
	return Config{
		StartTimeout:      10 * time.Second,
		CallTimeout:       60 * time.Second,
		OnUnavailable:     Fail,
		MaxResultBytes:    64 << 10,
		MaxMessageBytes:   DefaultMaxMessageBytes,
		RestartBackoff:    500 * time.Millisecond,
		RestartBackoffMax: 30 * time.Second,
		RestartStable:     30 * time.Second,
	}
}

// serverName is what a server's name may be: it starts every tool name,
// which providers limit to ^[a-zA-Z0-9_-]{1,64}$, and leaves room for the
// tool's own name.
var serverName = lazyregexp.New(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)

const maxServerName = 30

// Validate checks the config's words and limits.
func (c Config) Validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch {
	case c.Name == "":
		bad("name is missing; set name: to the server's name, which starts its tool names (name__tool)")
	case len(c.Name) > maxServerName || !serverName.MatchString(c.Name):
		bad("name %q is not usable in tool names; use at most %d letters, digits, '-' and single '_'", c.Name, maxServerName)
	}
	stdio, http := c.Command != "", c.URL != ""
	switch {
	case c.transport != nil:
	case stdio && http:
		bad("command and url are both set; a server is either a process (command) or an HTTP endpoint (url)")
	case !stdio && !http:
		bad("neither command nor url is set; give command: for a stdio server or url: for a streamable HTTP server")
	}
	if http && !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		bad("url %q is not an http:// or https:// URL", c.URL)
	}
	if http && (len(c.Args) > 0 || len(c.Env) > 0 || len(c.EnvPassthrough) > 0 || c.Cwd != "") {
		bad("args, env, env_passthrough and cwd apply to a stdio server (command:), not to url:")
	}
	if stdio && (len(c.Headers) > 0 || c.BearerTokenEnv != "") {
		bad("headers and bearer_token_env apply to an HTTP server (url:), not to command:")
	}
	for name, d := range map[string]time.Duration{"start_timeout": c.StartTimeout, "call_timeout": c.CallTimeout,
		"restart_backoff": c.RestartBackoff, "restart_backoff_max": c.RestartBackoffMax, "restart_stable": c.RestartStable} {
		if d <= 0 {
			bad("%s is %s; set a positive duration such as 10s", name, d)
		}
	}
	if c.RestartBackoffMax < c.RestartBackoff {
		bad("restart_backoff_max (%s) is below restart_backoff (%s)", c.RestartBackoffMax, c.RestartBackoff)
	}
	if c.OnUnavailable != Fail && c.OnUnavailable != Skip {
		bad("on_unavailable is %q; use %q or %q", c.OnUnavailable, Fail, Skip)
	}
	if c.MaxResultBytes < 256 {
		bad("max_result_bytes is %d; set at least 256", c.MaxResultBytes)
	}
	if c.MaxMessageBytes < 64<<10 {
		bad("max_message_bytes is %d; set at least 65536 (64 KiB)", c.MaxMessageBytes)
	}
	switch c.Approval {
	case "", "allow", "ask", "deny":
	default:
		bad("approval is %q; use allow, ask or deny (or leave it out to follow the tools' annotations)", c.Approval)
	}
	if len(problems) > 0 {
		return fmt.Errorf("mcp server %q: %s", c.Name, strings.Join(problems, "; "))
	}
	return nil
}
