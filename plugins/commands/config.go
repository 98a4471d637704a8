package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Config is the plugin's configuration.
type Config struct {
	// Paths are the folders holding command files, in order of
	// precedence: a name found in an earlier folder wins. A relative path
	// is taken from the agent's workspace, "~/" from the user's home.
	Paths []string `koanf:"paths" json:"paths,omitempty"`
	// Namespace, when set, is put before every command's own namespace:
	// a plugin bundle's commands answer to "/bundle:name" as in Claude
	// Code, and to "/name" while no earlier command has that name. The
	// bundle loader sets it to the bundle's name.
	Namespace string `koanf:"namespace" json:"namespace,omitempty"`
}

// DefaultPaths are Claude Code's: the project's commands, then the
// user's.
var DefaultPaths = []string{".claude/commands", "~/.claude/commands"}

// Defaults returns the config an entry's keys are decoded over.
func (Config) Defaults() Config { return Config{Paths: append([]string(nil), DefaultPaths...)} }

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	for i, p := range c.Paths {
		if strings.TrimSpace(p) == "" {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("%s: paths[%d] is empty; give a folder of command files, such as .claude/commands", ID, i))
		}
	}
	if c.Namespace != "" && !validInvocation.MatchString(c.Namespace) {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("%s: namespace %q cannot follow a slash; use letters, digits, '-', '_' or '.', words joined by ':'", ID, c.Namespace)).WithReason("commands/namespace")
	}
	return nil
}

// resolve turns the configured paths into absolute folders for an agent
// working in workspace.
func resolve(paths []string, workspace, home string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		switch {
		case p == "~" || strings.HasPrefix(p, "~/"):
			if home != "" {
				out = append(out, filepath.Join(home, strings.TrimPrefix(p, "~")))
			}
		case filepath.IsAbs(p):
			out = append(out, filepath.Clean(p))
		case workspace != "":
			out = append(out, filepath.Join(workspace, p))
		}
	}
	return out
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}
