package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// resolveWorkspace makes the agent's workspace absolute and clean, and
// checks that it is a directory.
//
// A relative workspace starts from dir, the working directory dsh was
// started in, not from the config file's directory: the default workspace
// is that directory, a value from --set or a DSH_ variable has no file to
// be relative to, and the config's other paths (exec:, session.jsonl's
// dir) start from it too — one rule for every path.
func resolveWorkspace(a *AgentConfig, at, dir string, p *problems) {
	ws := a.Workspace
	if ws == "" {
		ws = dir
	} else if !filepath.IsAbs(ws) {
		ws = filepath.Join(dir, ws)
	}
	ws = filepath.Clean(ws)
	st, err := os.Stat(ws)
	switch {
	case err != nil && os.IsNotExist(err):
		p.add(at+".workspace", fmt.Sprintf("workspace %q does not exist; create the directory or point workspace: at one (relative paths start from the working directory, %s)", ws, dir))
	case err != nil:
		p.add(at+".workspace", fmt.Sprintf("workspace %q cannot be read: %v", ws, err))
	case !st.IsDir():
		p.add(at+".workspace", fmt.Sprintf("workspace %q is a file, not a directory; point workspace: at the directory the agent works in", ws))
	}
	a.Workspace = ws
}

// workingDir is the directory relative paths start from.
func (o LoadOptions) workingDir() (string, error) {
	if o.Dir != "" {
		return filepath.Abs(o.Dir)
	}
	return os.Getwd()
}
