package bundle

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// Bundle is a plugin bundle as read from disk: what dsh mounts, and what it
// does not with the reason.
type Bundle struct {
	// Root is the bundle's directory, absolute with symlinks resolved:
	// the value of ${CLAUDE_PLUGIN_ROOT}.
	Root string
	// Name is the manifest's name, or the folder's when there is none.
	Name string
	// Manifest is the manifest file read, "" when the bundle has none.
	Manifest string
	// Skills are folders of skills (<name>/SKILL.md), or skill folders.
	Skills []string
	// Commands are folders of command files, or command files (*.md).
	Commands []string
	// Hooks are the hook groups by event, from every hooks file and the
	// manifest's inline hooks, in the shape of a hooks.json "hooks" key,
	// with ${CLAUDE_PLUGIN_ROOT} replaced in each command.
	Hooks map[string][]any
	// HookSources name where the hooks came from ("./hooks/hooks.json").
	HookSources []string
	// Servers are the MCP servers to mount.
	Servers []Server
	// Agents are the agent definitions found, each to be offered through
	// one tools.agent entry of the bundle.
	Agents []Agent
	// Notes say what is not mounted or ignored, and why, one line each.
	Notes []string
	// Vars are the variables of dsh's environment the MCP config read.
	Vars []string
}

// Agent is an agent definition (agents/*.md): its front matter, and its
// body, which is the agent's system prompt.
type Agent struct {
	Name, Description, File string
	SystemPrompt            string
	// Tools is the front matter's tools: list, which dsh does not apply
	// (a child gets its template's and presets' tools); kept to report.
	Tools []string
	// Model is the front matter's model: "" when it is absent or
	// "inherit", or a model id run with the calling agent's provider.
	// Claude Code's aliases (sonnet, opus, haiku) are reported and
	// dropped: dsh does not know which model of the provider they mean.
	Model string
}

// The default component locations of the format.
const (
	defaultCommands = "commands"
	defaultAgents   = "agents"
	defaultSkills   = "skills"
	defaultHooks    = "hooks/hooks.json"
	defaultMCP      = ".mcp.json"
)

// pluginName is the format's name rule: lowercase letters and digits in
// words joined by single '-' (or '.', which the Open Plugins spec allows).
var pluginName = lazyregexp.New(`^[a-z0-9]+([.-][a-z0-9]+)*$`)

// Load reads the bundle at dir. lookup resolves ${VAR} in its MCP servers'
// config. Every defect is reported at once, each naming its file and
// field; a part dsh cannot mount is a Note, not an error.
func Load(dir string, lookup func(string) (string, bool)) (*Bundle, error) {
	p := &problems{}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		p.add(dir, "", "cannot read the bundle: %v", unwrapPathErr(err))
		return nil, p.err("bundle "+dir, "bundle/missing")
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		p.add(dir, "", "not a directory; a bundle is the plugin's folder (the one holding .claude-plugin/)")
		return nil, p.err("bundle "+dir, "bundle/missing")
	}
	b := &Bundle{Root: abs, Hooks: map[string][]any{}}
	l := &loader{b: b, p: p, x: &expander{lookup: lookup, root: abs}}
	m := l.manifest()
	if m != nil || b.Manifest == "" && len(p.list) == 0 {
		// Path defects are worth reporting beside the manifest's own.
		l.components(m)
	}
	b.Vars = l.x.read
	b.Notes = sortedNotes(dedupe(b.Notes))
	if err := p.err("bundle "+dir, "bundle/invalid"); err != nil {
		return nil, err
	}
	if b.Manifest == "" && len(b.Skills)+len(b.Commands)+len(b.HookSources)+len(b.Servers)+len(b.Agents)+len(b.Notes) == 0 {
		p.add(dir, "", "not a plugin bundle: it has no .claude-plugin/plugin.json and none of commands/, skills/, agents/, hooks/hooks.json, .mcp.json")
		return nil, p.err("bundle "+dir, "bundle/empty")
	}
	return b, nil
}

type loader struct {
	b *Bundle
	p *problems
	x *expander
}

func (l *loader) note(format string, args ...any) {
	l.b.Notes = append(l.b.Notes, fmt.Sprintf(format, args...))
}

// paths reads a manifest field that is a path or a list of paths.
func (l *loader) paths(file, field string, v any) []string {
	var rels []string
	switch x := v.(type) {
	case string:
		rels = []string{x}
	case []any:
		rels = strList(l.p, file, field, x)
	default:
		l.p.add(file, field, "expected a path such as \"./%s\" or a list of paths, got %s", field, jsonKind(v))
		return nil
	}
	var out []string
	for i, rel := range rels {
		at := field
		if _, list := v.([]any); list {
			at = fmt.Sprintf("%s[%d]", field, i)
		}
		if path, ok := resolve(l.p, l.b.Root, file, at, rel); ok {
			out = append(out, path)
		}
	}
	return out
}

// components finds every part: in the manifest's paths where it gives
// them, else in the default locations.
func (l *loader) components(m map[string]any) {
	file := "plugin.json"
	if l.b.Manifest != "" {
		file = show(l.b.Root, l.b.Manifest)[2:]
	}
	// For skills, commands and agents a manifest path replaces the
	// default folder, as in Claude Code's reference; write both to keep
	// the default.
	dirs := func(field, def string) []string {
		if v, has := m[field]; has {
			return l.paths(file, field, v)
		}
		if exists(l.b.Root, def) {
			if path, ok := resolve(l.p, l.b.Root, def, "", "./"+def); ok {
				return []string{path}
			}
		}
		return nil
	}
	for _, path := range dirs("skills", defaultSkills) {
		if st, err := os.Stat(path); err != nil || !st.IsDir() {
			l.p.add(file, "skills", "%s is not a folder; skills are folders holding <name>/SKILL.md", show(l.b.Root, path))
			continue
		}
		if l.readable(file, "skills", path) {
			l.b.Skills = append(l.b.Skills, path)
		}
	}
	for _, path := range dirs("commands", defaultCommands) {
		st, err := os.Stat(path)
		if err != nil || (!st.IsDir() && !strings.HasSuffix(path, ".md")) {
			l.p.add(file, "commands", "%s is neither a folder nor a .md command file", show(l.b.Root, path))
			continue
		}
		if l.readable(file, "commands", path) {
			l.b.Commands = append(l.b.Commands, path)
		}
	}
	for _, path := range dirs("agents", defaultAgents) {
		if l.readable(file, "agents", path) {
			l.agents(path)
		}
	}
	l.hooks(file, m)
	l.servers(file, m)
	for _, rel := range []string{".lsp.json", "output-styles", "monitors", "bin", "settings.json"} {
		if exists(l.b.Root, rel) {
			l.note("./%s: not mounted: %s", rel, map[string]string{
				".lsp.json":     "dsh does not run language servers",
				"output-styles": "dsh has no output styles",
				"monitors":      "dsh does not run background monitors",
				"bin":           "dsh does not add a bundle's executables to the tools' PATH",
				"settings.json": "dsh does not take settings from a bundle",
			}[rel])
		}
	}
}

// readable reports whether dsh's user can read path (a folder's list, or
// a file), and reports it when not: the plugin behind the part would
// otherwise skip what it cannot read, and the part would be silently
// empty. As root this always holds; as another user a folder of another
// owner may be closed.
func (l *loader) readable(file, field, path string) bool {
	f, err := os.Open(path)
	if err == nil {
		if st, serr := f.Stat(); serr == nil && st.IsDir() {
			_, err = f.Readdirnames(1)
			if err == io.EOF {
				err = nil
			}
		}
		f.Close()
	}
	if err != nil {
		l.p.add(file, field, "cannot read %s: %v; dsh runs as uid %d", show(l.b.Root, path), unwrapPathErr(err), os.Getuid())
		return false
	}
	return true
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
