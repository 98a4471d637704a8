package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/internal/bundle"
)

// BundleReport is what one bundle: or mcp_json: entry mounted, for dsh
// config check and the start log.
type BundleReport struct {
	// At is the entry's key path ("plugins[2]", "presets.review[0]").
	At string
	// ID is the entry's id, which starts the ids of what it mounts.
	ID string
	// Kind is "bundle" or "mcp_json"; Path what the entry names, resolved.
	Kind, Path string
	// Name is the bundle's name (its manifest's, else its folder's).
	Name string
	// Entries are the ids of the entries it became, in order.
	Entries []string
	// Vars are variables of dsh's environment its MCP servers read.
	Vars []string
	// Notes are its parts that are not mounted or ignored, with why.
	Notes []string
}

// Bundles reports what the config's bundle: and mcp_json: entries
// mounted, in config order.
func (c *Config) Bundles() []BundleReport { return c.bundles }

// providerKeys are the variables dsh's model providers read their keys
// from by default. dsh keeps them from every child process; a bundle that
// names one in ${...} asks for it explicitly, which the operator should
// see.
var providerKeys = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY"}

// noteBundleWorkspaces points out a bundle whose folder holds an agent's
// workspace: the whole folder is protected, so every write of that agent
// asks a person first — right for a bundle, surprising for a workspace.
func (c *Config) noteBundleWorkspaces() {
	for i := range c.bundles {
		r := &c.bundles[i]
		if r.Kind != "bundle" {
			continue
		}
		for _, a := range c.Agents {
			ws, err := filepath.EvalSymlinks(a.Workspace)
			if err != nil {
				continue // reported with the agent
			}
			if ws == r.Path || strings.HasPrefix(ws, r.Path+string(os.PathSeparator)) {
				r.Notes = append(r.Notes, fmt.Sprintf("agent %q works inside the bundle's folder (%s), which is protected while the bundle is mounted: each of its writes there asks first", a.ID, a.Workspace))
			}
		}
	}
}

// renamePluginTools rewrites, in the bundle's hook matchers, the names
// Claude Code gives a plugin's own MCP tools (mcp__plugin_<plugin>_<server>__<tool>)
// to the names dsh gives them (<server>__<tool>): a guard written for the
// bundle's own server must not silently stop matching. A matcher that
// still names a plugin's tools after that (another plugin's, or a pattern
// over the prefix) is reported, since nothing in dsh is named so.
func renamePluginTools(b *bundle.Bundle) []string {
	var notes []string
	for _, ev := range slices.Sorted(maps.Keys(b.Hooks)) {
		for i, g := range b.Hooks[ev] {
			group, _ := g.(map[string]any)
			m, _ := group["matcher"].(string)
			if !strings.Contains(m, "mcp__plugin_") {
				continue
			}
			orig := m
			for _, s := range b.Servers {
				m = strings.ReplaceAll(m, "mcp__plugin_"+b.Name+"_"+s.Name+"__", mcpName(s.Name)+"__")
			}
			group["matcher"] = m
			at := fmt.Sprintf("hooks.%s[%d].matcher", ev, i)
			if m != orig {
				notes = append(notes, fmt.Sprintf("%s %q: matches the bundle's own MCP tools by dsh's names, as %q", at, orig, m))
			}
			if strings.Contains(m, "mcp__plugin_") {
				notes = append(notes, fmt.Sprintf("%s %q: names tools by Claude Code's plugin prefix (mcp__plugin_...), which no dsh tool has; it matches nothing of another bundle's, whose tools are <server>__<tool>", at, m))
			}
		}
	}
	return notes
}
