package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What a `dsh serve` client may choose when it opens a session. The
// operator's agent config is the limit: a client picks a workspace and
// presets only from the lists under serve: (workspaces, client_presets),
// and by default from nothing but what the agent has anyway. Before, a
// client could open a session on "/" and mount any preset.

// checkClientChoices resolves serve.workspaces and checks
// serve.client_presets.
func (c *Config) checkClientChoices(p *problems) {
	s := &c.Serve
	for i, dir := range s.Workspaces {
		at := fmt.Sprintf("serve.workspaces[%d]", i)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(c.wd, dir)
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			p.add(at, fmt.Sprintf("%q cannot be resolved: %v; list existing directories", dir, err))
			continue
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			p.add(at, fmt.Sprintf("%q is not a directory", dir))
			continue
		}
		s.Workspaces[i] = real
	}
	for i, name := range s.ClientPresets {
		if _, ok := c.Presets[name]; !ok && !slices.Contains(builtinNames(), name) {
			p.add(fmt.Sprintf("serve.client_presets[%d]", i), fmt.Sprintf("preset %q is not defined; defined presets: %s; built-in: %s", name, orNone(c.DefinedPresets()), strings.Join(builtinNames(), ", ")))
		}
	}
}

// ChoiceRefused is a client's choice that the operator did not allow;
// What is "workspace" or "preset".
type ChoiceRefused struct {
	What, Msg string
}

func (e *ChoiceRefused) Error() string { return e.Msg }

// ClientWorkspace returns the workspace a session of agent opens on when
// a client asks for requested (an absolute path; "" is the agent's own):
// the agent's own workspace, or a directory at or under one of
// serve.workspaces. Symbolic links are resolved first, and the resolved
// path is what the session gets, so a link swapped later changes nothing.
func (c *Config) ClientWorkspace(agent AgentConfig, requested string) (string, error) {
	if requested == "" {
		return "", nil
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(requested))
	if err != nil {
		return "", &ChoiceRefused{"workspace", fmt.Sprintf("workspace %q cannot be resolved: %v; send the absolute path of an existing directory", requested, err)}
	}
	if own, err := filepath.EvalSymlinks(agent.Workspace); err == nil && own == real {
		return real, nil
	}
	for _, allowed := range c.Serve.Workspaces {
		if within(allowed, real) {
			return real, nil
		}
	}
	allowed := "none: sessions run in the agent's own workspace"
	if len(c.Serve.Workspaces) > 0 {
		allowed = strings.Join(c.Serve.Workspaces, ", ") + " and the directories under them"
	}
	return "", &ChoiceRefused{"workspace", fmt.Sprintf(
		"workspace %q is not one a client may choose for agent %q (its own is %s; serve.workspaces allows %s); leave workspace out, or have the operator add the directory to serve.workspaces",
		requested, agent.ID, agent.Workspace, allowed)}
}

// within reports whether path is dir or under it; both are clean.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// ClientPresets returns the presets to add to a session of agent when a
// client asks for requested: those the agent or serve.presets mount anyway
// are left out (they are mounted once), the rest must be listed in
// serve.client_presets.
func (c *Config) ClientPresets(agent AgentConfig, requested []string) ([]string, error) {
	var out []string
	for _, name := range requested {
		switch {
		case slices.Contains(agent.PresetNames(), name), slices.Contains(c.Serve.Presets, name), slices.Contains(out, name):
		case slices.Contains(c.Serve.ClientPresets, name):
			out = append(out, name)
		default:
			return nil, &ChoiceRefused{"preset", fmt.Sprintf(
				"preset %q is not one a client may add (serve.client_presets allows: %s); leave it out, or have the operator add it to serve.client_presets",
				name, orNone(c.Serve.ClientPresets))}
		}
	}
	return out, nil
}
