package bundle

import (
	"slices"
	"strings"

	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// PluginRootVar is the placeholder, and the variable hooks and servers see,
// that names the bundle's root directory.
const PluginRootVar = "CLAUDE_PLUGIN_ROOT"

// OpenPluginRootVar is the Open Plugins specification's name for the same
// directory; a bundle may use either.
const OpenPluginRootVar = "PLUGIN_ROOT"

// pluginDataVar is Claude Code's per-plugin data directory, which dsh does
// not provide (yet); a reference to it is refused rather than expanded to
// a value the bundle did not expect.
const pluginDataVar = "CLAUDE_PLUGIN_DATA"

// placeholder is Claude Code's grammar: ${NAME} or ${NAME:-default}, the
// default running to the first '}'.
var placeholder = lazyregexp.New(`\$\{([^}]+)\}`)

// expander expands placeholders in .mcp.json values and remembers what it
// read and what it missed.
type expander struct {
	lookup func(string) (string, bool)
	root   string // "" outside a bundle
	read   []string
	miss   []string
}

// expand replaces each placeholder once, as Claude Code does: a set
// variable (even to "") wins, else the default after ":-", else the name is
// missing and the text stays as written. Text a replacement brings in is
// not scanned again.
func (x *expander) expand(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		inner := m[2 : len(m)-1]
		name, def, hasDef := strings.Cut(inner, ":-")
		if x.root != "" && (name == PluginRootVar || name == OpenPluginRootVar) {
			return x.root
		}
		if name == pluginDataVar {
			x.missing(name)
			return m
		}
		if v, ok := x.lookup(name); ok {
			x.note(name)
			return v
		}
		if hasDef {
			return def
		}
		x.missing(name)
		return m
	})
}

func (x *expander) note(name string) {
	if !slices.Contains(x.read, name) {
		x.read = append(x.read, name)
	}
}

func (x *expander) missing(name string) {
	if !slices.Contains(x.miss, name) {
		x.miss = append(x.miss, name)
	}
}

// takeMissing returns and forgets the names missed since the last call, so
// each field reports its own.
func (x *expander) takeMissing() []string {
	m := x.miss
	x.miss = nil
	return m
}

// expandRoot replaces only ${CLAUDE_PLUGIN_ROOT} (and the Open Plugins
// ${PLUGIN_ROOT}): what Claude Code does to a hook's command before the
// shell sees it. Every other ${...} is left to the shell.
func expandRoot(s, root string) string {
	s = strings.ReplaceAll(s, "${"+PluginRootVar+"}", root)
	return strings.ReplaceAll(s, "${"+OpenPluginRootVar+"}", root)
}

// EnvLookup turns an environment list (os.Environ's form) into a lookup;
// the last entry of a name wins, as in a process environment.
func EnvLookup(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
