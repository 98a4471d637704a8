package bash

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsh-go/dsh/internal/egress"
	"github.com/dsh-go/dsh/internal/sandbox"
)

// Sandbox modes and policies for a kernel that lacks what the mode needs.
const (
	// ModeLandlock runs every command in the sandbox: namespaces, another
	// kernel uid when dsh is root, no capabilities, Landlock (Linux).
	ModeLandlock = "landlock"
	// ModeOff runs commands with the user's full access.
	ModeOff = "off"
	// Refuse answers every command with an error result saying why.
	Refuse = "refuse"
	// Warn runs commands as confined as the kernel allows, saying so.
	Warn = "warn"
)

// Config is the plugin's configuration.
type Config struct {
	// Timeout bounds a command that gives no timeout argument.
	Timeout time.Duration `koanf:"timeout" json:"timeout,omitempty"`
	// MaxTimeout bounds the timeout argument.
	MaxTimeout time.Duration `koanf:"max_timeout" json:"max_timeout,omitempty"`
	// MaxOutputBytes caps the output the model reads: the first and last
	// halves are kept, the middle is cut and counted.
	MaxOutputBytes int `koanf:"max_output_bytes" json:"max_output_bytes,omitempty"`
	// Env is set in the command's environment, over the minimal one.
	Env map[string]string `koanf:"env" json:"env,omitempty"`
	// EnvPassthrough names variables of dsh's environment the command
	// may see (nothing else beyond the minimal set reaches it).
	EnvPassthrough []string `koanf:"env_passthrough" json:"env_passthrough,omitempty"`
	// Sandbox confines the commands.
	Sandbox SandboxConfig `koanf:"sandbox" json:"sandbox"`
	// Jobs lets commands run in the background (see JobsConfig).
	Jobs JobsConfig `koanf:"jobs" json:"jobs,omitzero"`
}

// SandboxConfig says how commands are confined.
type SandboxConfig struct {
	// Mode is landlock (default: namespaces, another uid when dsh is
	// root, Landlock) or off.
	Mode string `koanf:"mode" json:"mode,omitempty"`
	// Network is off (default), on, or {allow: [...], deny: [...]}: only
	// through dsh's egress proxy, which enforces the domain lists. The
	// booleans of earlier versions mean off and on.
	Network any `koanf:"network" json:"network,omitempty"`
	// Unavailable decides what happens where the kernel cannot enforce
	// the sandbox: refuse (default) or warn.
	Unavailable string `koanf:"unavailable" json:"unavailable,omitempty"`
	// Writable lists more absolute directories commands may write beneath,
	// besides the workspace and their temp dir (a build cache, say).
	Writable []string `koanf:"writable" json:"writable,omitempty"`
	// ReadOnly lists paths, relative to the workspace or absolute, that
	// commands may not change even inside a writable directory: what
	// dsh or git would later load and run. A missing one cannot be
	// created either: an empty read-only directory stands in its place
	// while a command runs.
	ReadOnly []string `koanf:"read_only" json:"read_only,omitempty"`
	// HomeFiles are the paths, relative to $HOME, a command may read when
	// dsh runs as root and $HOME is root's alone (/root): the rest of the
	// home is masked, so keys and tokens kept there stay dsh's. Unset
	// means git's configuration (.gitconfig, .config/git); an empty list
	// shows nothing. Add a cache a build needs (go/pkg/mod, .cargo).
	HomeFiles []string `koanf:"home_files" json:"home_files,omitempty"`
	// UID is the kernel uid (and gid) commands run under when dsh runs as
	// root; default 65534 (nobody). Root itself is refused.
	UID int `koanf:"uid" json:"uid,omitempty"`
	// UnixSockets lets commands make unix sockets while the network is
	// not on. On kernels whose Landlock predates ABI 9 (Linux 6.18) the
	// sandbox cannot tell a socket made inside from one made outside, so
	// by default commands there make none; on, they can also reach the
	// sockets outside that their uid may open (a user's D-Bus, tmux,
	// ssh-agent, docker). For test suites and tools that serve on a unix
	// socket (Python multiprocessing managers, gpg-agent).
	UnixSockets bool `koanf:"unix_sockets" json:"unix_sockets,omitempty"`
}

// DefaultReadOnly are the paths commands may not change by default: git's
// config and hooks (a later git run executes them), the commondir and
// worktree files that send git to another configuration, and the files dsh and
// other agents load as instructions or settings.
var DefaultReadOnly = []string{".git/config", ".git/hooks", ".git/info", ".git/commondir", ".git/worktrees", ".git/config.worktree", ".claude", ".agents", "AGENTS.md", "CLAUDE.md", ".mcp.json"}

// NetworkPolicy is sandbox.network decoded.
type NetworkPolicy struct {
	// Mode is off, on or proxied.
	Mode sandbox.Network
	// Egress is the proxy's policy when Mode is proxied: the domains,
	// addresses and ports commands may reach, and those they may not.
	Egress egress.Policy
}

// Policy decodes sandbox.network: a boolean, "off", "on", or a map with
// allow and deny lists (egress.ParsePolicy reads every form and says what
// is wrong with a bad entry).
func (c SandboxConfig) Policy() (NetworkPolicy, error) {
	p, err := egress.ParsePolicy("sandbox.network", c.Network)
	if err != nil {
		return NetworkPolicy{}, err
	}
	switch p.Mode {
	case egress.ModeOn:
		return NetworkPolicy{Mode: sandbox.NetworkOn}, nil
	case egress.ModeAllowList:
		return NetworkPolicy{Mode: sandbox.NetworkProxied, Egress: p}, nil
	}
	return NetworkPolicy{Mode: sandbox.NetworkOff}, nil
}

// Defaults: two minutes per command, ten at most, 30000 bytes of output,
// the sandbox with the network off and DefaultReadOnly protected, and no
// command where it cannot be had.
func (Config) Defaults() Config {
	return Config{
		Timeout:        2 * time.Minute,
		MaxTimeout:     10 * time.Minute,
		MaxOutputBytes: 30000,
		Sandbox: SandboxConfig{Mode: ModeLandlock, Unavailable: Refuse,
			ReadOnly: append([]string(nil), DefaultReadOnly...)},
		Jobs: JobsConfig{MaxRunning: 8, BufferBytes: 1 << 20, Wake: WakeOn},
	}
}

// Validate checks the limits and the sandbox's words.
func (c Config) Validate() error {
	switch {
	case c.Timeout <= 0:
		return fmt.Errorf("timeout is %s; set a positive duration such as 2m", c.Timeout)
	case c.MaxTimeout < c.Timeout:
		return fmt.Errorf("max_timeout (%s) is below timeout (%s); raise max_timeout", c.MaxTimeout, c.Timeout)
	case c.MaxOutputBytes < 256:
		return fmt.Errorf("max_output_bytes is %d; set at least 256", c.MaxOutputBytes)
	}
	if c.Sandbox.Mode != ModeLandlock && c.Sandbox.Mode != ModeOff {
		return fmt.Errorf("sandbox.mode is %q; use %q or %q", c.Sandbox.Mode, ModeLandlock, ModeOff)
	}
	if c.Sandbox.Unavailable != Refuse && c.Sandbox.Unavailable != Warn {
		return fmt.Errorf("sandbox.unavailable is %q; use %q or %q", c.Sandbox.Unavailable, Refuse, Warn)
	}
	for _, w := range c.Sandbox.Writable {
		if !filepath.IsAbs(w) {
			return fmt.Errorf("sandbox.writable lists %q, which is not an absolute path", w)
		}
	}
	for _, p := range c.Sandbox.ReadOnly {
		if strings.TrimSpace(p) == "" || strings.Contains("/"+p+"/", "/../") {
			return fmt.Errorf("sandbox.read_only lists %q; give a path inside the workspace or an absolute one, with no \"..\" in it", p)
		}
	}
	for _, p := range c.Sandbox.HomeFiles {
		if clean := filepath.Clean(p); p == "" || filepath.IsAbs(p) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("sandbox.home_files lists %q; give a path relative to the home directory, such as .gitconfig, with no \"..\" in it", p)
		}
	}
	if c.Sandbox.UID < 0 || c.Sandbox.UID > 1<<31-2 {
		return fmt.Errorf("sandbox.uid is %d; give an unprivileged uid such as 65534", c.Sandbox.UID)
	}
	if _, err := c.Sandbox.Policy(); err != nil {
		return err
	}
	return c.Jobs.validate()
}
