package lsp

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// Config is the plugin's configuration.
type Config struct {
	// Servers are the language servers, tried in order: a file goes to
	// the first whose files globs match its name. The default is gopls
	// for Go.
	Servers []Server `koanf:"servers" json:"servers,omitempty"`
	// Diagnostics appends new errors to write and edit results (default
	// true).
	Diagnostics *bool `koanf:"diagnostics" json:"diagnostics,omitempty"`
	// DiagnosticsWait bounds the wait for the server's diagnostics after
	// an edit (default 3s); the edit's result says when it ran out.
	DiagnosticsWait time.Duration `koanf:"diagnostics_wait" json:"diagnostics_wait,omitempty"`
	// MaxDiagnostics caps the new errors one result lists (default 10).
	MaxDiagnostics int `koanf:"max_diagnostics" json:"max_diagnostics,omitempty"`
	// MaxResults caps the locations and symbols a tool lists (default 50).
	MaxResults int `koanf:"max_results" json:"max_results,omitempty"`
	// StartTimeout bounds a server's start and initialize handshake
	// (default 20s).
	StartTimeout time.Duration `koanf:"start_timeout" json:"start_timeout,omitempty"`
	// RequestTimeout bounds one request of a tool (default 30s).
	RequestTimeout time.Duration `koanf:"request_timeout" json:"request_timeout,omitempty"`
	// RestartBackoff is the wait before restarting a crashed server; it
	// doubles with each crash in a row up to RestartBackoffMax, and
	// resets once a server stayed up for RestartStable.
	RestartBackoff    time.Duration `koanf:"restart_backoff" json:"restart_backoff,omitempty"`
	RestartBackoffMax time.Duration `koanf:"restart_backoff_max" json:"restart_backoff_max,omitempty"`
	RestartStable     time.Duration `koanf:"restart_stable" json:"restart_stable,omitempty"`
}

// Server is one configured language server.
type Server struct {
	// Name names the server in results and logs (default: the command's
	// base name).
	Name string `koanf:"name" json:"name,omitempty"`
	// Command is the program, looked up on dsh's PATH.
	Command string   `koanf:"command" json:"command"`
	Args    []string `koanf:"args" json:"args,omitempty"`
	// Files are globs on a file's base name ("*.go", "*.ts"): the files
	// this server handles.
	Files []string `koanf:"files" json:"files"`
	// RootMarkers are names whose folder is a project root (go.mod,
	// package.json); the nearest at or above a file, inside the
	// workspace, is the server's root. None found: the workspace.
	RootMarkers []string `koanf:"root_markers" json:"root_markers,omitempty"`
	// LanguageID is the LSP language id of the files (default: from the
	// file's extension, e.g. "go", "typescript", "python").
	LanguageID string `koanf:"language_id" json:"language_id,omitempty"`
	// Env is set in the server's environment; EnvPassthrough names
	// variables of dsh's environment it may see (it gets the base set:
	// PATH, HOME, the locale...).
	Env            map[string]string `koanf:"env" json:"env,omitempty"`
	EnvPassthrough []string          `koanf:"env_passthrough" json:"env_passthrough,omitempty"`
	// InitializationOptions are passed to the server as given.
	InitializationOptions map[string]any `koanf:"initialization_options" json:"initialization_options,omitempty"`
}

// Gopls is the default server.
func Gopls() Server {
	return Server{Name: "gopls", Command: "gopls", Files: []string{"*.go"}, RootMarkers: []string{"go.work", "go.mod"}, LanguageID: "go"}
}

// Defaults is the configuration of an entry that sets nothing.
func (Config) Defaults() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if len(c.Servers) == 0 {
		c.Servers = []Server{Gopls()}
	}
	if c.Diagnostics == nil {
		on := true
		c.Diagnostics = &on
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	dur(&c.DiagnosticsWait, 3*time.Second)
	dur(&c.StartTimeout, 20*time.Second)
	dur(&c.RequestTimeout, 30*time.Second)
	dur(&c.RestartBackoff, 500*time.Millisecond)
	dur(&c.RestartBackoffMax, 30*time.Second)
	dur(&c.RestartStable, time.Minute)
	if c.MaxDiagnostics == 0 {
		c.MaxDiagnostics = 10
	}
	if c.MaxResults == 0 {
		c.MaxResults = 50
	}
	servers := make([]Server, len(c.Servers))
	for i, s := range c.Servers {
		if s.Name == "" {
			s.Name = path.Base(s.Command)
		}
		servers[i] = s
	}
	c.Servers = servers
	return c
}

// Validate says what is wrong with each bad field, and how to fix it.
func (c Config) Validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := map[string]bool{}
	for i, s := range c.Servers {
		where := fmt.Sprintf("servers[%d]", i)
		if s.Command == "" {
			bad("%s has no command; give the server's program, such as gopls", where)
		}
		if len(s.Files) == 0 {
			bad("%s has no files; give globs on file names, such as [\"*.go\"]", where)
		}
		for _, g := range s.Files {
			if _, err := path.Match(g, "x"); err != nil || strings.Contains(g, "/") {
				bad("%s: files glob %q is not a glob on a base name; use a pattern such as \"*.go\"", where, g)
			}
		}
		name := s.Name
		if name == "" {
			name = path.Base(s.Command)
		}
		if names[name] {
			bad("%s: the name %q is taken by another server; give each a name of its own", where, name)
		}
		names[name] = true
	}
	for name, d := range map[string]time.Duration{"diagnostics_wait": c.DiagnosticsWait, "start_timeout": c.StartTimeout,
		"request_timeout": c.RequestTimeout, "restart_backoff": c.RestartBackoff, "restart_backoff_max": c.RestartBackoffMax,
		"restart_stable": c.RestartStable} {
		if d < 0 {
			bad("%s is %s; set a positive duration such as 5s (0 takes the default)", name, d)
		}
	}
	if c.MaxDiagnostics < 0 || c.MaxResults < 0 {
		bad("max_diagnostics and max_results must be positive (0 takes the default)")
	}
	if len(problems) > 0 {
		return errs.New(errs.InvalidArgument, "lsp: "+strings.Join(problems, "; "))
	}
	return nil
}

// serverFor is the first server whose globs match name's base name.
func (c Config) serverFor(name string) (Server, bool) {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	for _, s := range c.Servers {
		for _, g := range s.Files {
			if ok, _ := path.Match(g, base); ok {
				return s, true
			}
		}
	}
	return Server{}, false
}

// languageID is the LSP language id of a file the server handles.
func (s Server) languageID(file string) string {
	if s.LanguageID != "" {
		return s.LanguageID
	}
	ext := strings.TrimPrefix(path.Ext(file), ".")
	switch ext {
	case "ts":
		return "typescript"
	case "tsx":
		return "typescriptreact"
	case "js", "mjs", "cjs":
		return "javascript"
	case "jsx":
		return "javascriptreact"
	case "py":
		return "python"
	case "rs":
		return "rust"
	case "rb":
		return "ruby"
	case "":
		return s.Name
	}
	return ext
}
