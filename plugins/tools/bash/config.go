package bash

import (
	"fmt"
	"path/filepath"
	"time"
)

// Sandbox modes and policies for a kernel that lacks what the mode needs.
const (
	// ModeLandlock runs every command under Landlock (Linux).
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
}

// SandboxConfig says how commands are confined.
type SandboxConfig struct {
	// Mode is landlock (default) or off.
	Mode string `koanf:"mode" json:"mode,omitempty"`
	// Network allows network access from commands (default false).
	Network bool `koanf:"network" json:"network"`
	// Unavailable decides what happens where the kernel cannot enforce
	// the sandbox: refuse (default) or warn.
	Unavailable string `koanf:"unavailable" json:"unavailable,omitempty"`
	// Writable lists more absolute directories commands may write beneath,
	// besides the workspace and their temp dir (a build cache, say).
	Writable []string `koanf:"writable" json:"writable,omitempty"`
}

// Defaults: two minutes per command, ten at most, 30000 bytes of output,
// Landlock with the network off, and no command where it cannot be had.
func (Config) Defaults() Config {
	return Config{
		Timeout:        2 * time.Minute,
		MaxTimeout:     10 * time.Minute,
		MaxOutputBytes: 30000,
		Sandbox:        SandboxConfig{Mode: ModeLandlock, Unavailable: Refuse},
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
	return nil
}
