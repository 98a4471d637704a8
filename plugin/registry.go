package plugin

import (
	"fmt"
	"sort"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// Info describes a registered plugin: what `dsh plugins` lists and what the
// host needs to check and mount an entry that uses it.
type Info struct {
	// ID is namespaced, lower-case, dot separated: "admission.rate-limit".
	ID string
	// Doc is one line saying what the plugin does.
	Doc string
	// Plugin is applied for every entry that uses the id.
	Plugin dshctx.Plugin
	// Config returns a pointer to a fresh config value holding the
	// defaults; the host decodes the entry's config into it, strictly, and
	// passes it to Apply. Nil means the plugin takes no config, and an
	// entry that gives one is an error.
	Config func() any
	// Provider, for a plugin that registers a model provider, returns the
	// provider name an entry registers given its decoded config; see
	// ProvidesModel.
	Provider func(config any) string
	// SessionStore marks a plugin that persists sessions; see
	// StoresSessions.
	SessionStore bool
}

var (
	mu       sync.RWMutex
	registry = map[string]Info{}
	validID  = lazyregexp.New(`^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)+$`)
)

func add(info Info) {
	if !validID.MatchString(info.ID) {
		panic(fmt.Sprintf("plugin.Register: plugin id %q is not namespaced lower-case (want e.g. \"admission.rate-limit\")", info.ID))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[info.ID]; dup {
		panic(fmt.Sprintf("plugin.Register: plugin %q registered twice; each id belongs to one plugin", info.ID))
	}
	registry[info.ID] = info
}

// Lookup returns the plugin registered under id.
func Lookup(id string) (Info, bool) {
	mu.RLock()
	defer mu.RUnlock()
	info, ok := registry[id]
	return info, ok
}

// List returns the registered plugins sorted by id.
func List() []Info {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Info, 0, len(registry))
	for _, info := range registry {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
