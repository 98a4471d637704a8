package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Config is the plugin's configuration.
type Config struct {
	// Paths are the folders whose subfolders are skills, in order of
	// precedence: a name found in an earlier folder wins. A relative path
	// is taken from the agent's workspace, "~/" from the user's home.
	Paths []string `koanf:"paths" json:"paths,omitempty"`
}

// DefaultPaths are where Claude Code, Codex and the other clients of the
// format look: the project's folders first, then the user's.
var DefaultPaths = []string{".claude/skills", ".agents/skills", "~/.claude/skills", "~/.agents/skills"}

// Defaults returns the config an entry's keys are decoded over.
func (Config) Defaults() Config { return Config{Paths: append([]string(nil), DefaultPaths...)} }

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	for i, p := range c.Paths {
		if strings.TrimSpace(p) == "" {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("%s: paths[%d] is empty; give a folder holding skill folders, such as .claude/skills", ID, i))
		}
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
			if home == "" {
				continue // no home: the user's folders do not exist
			}
			out = append(out, filepath.Join(home, strings.TrimPrefix(p, "~")))
		case filepath.IsAbs(p):
			out = append(out, filepath.Clean(p))
		default:
			if workspace == "" {
				continue
			}
			out = append(out, filepath.Join(workspace, p))
		}
	}
	return out
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}
