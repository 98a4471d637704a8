package host

import (
	"fmt"
	"regexp"
	"sort"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
)

// Info describes an in-process plugin that config entries can use by id.
type Info struct {
	// ID is namespaced, lower-case, dot separated: "admission.rate-limit".
	ID string
	// Doc is one line saying what the plugin does.
	Doc string
	// Plugin is applied for every entry that uses the id.
	Plugin dshctx.Plugin
	// Config returns a pointer to a fresh config value; the entry's config
	// is decoded into it, strictly, and passed to Apply. Nil means the
	// plugin takes no config, and an entry that gives one is an error.
	Config func() any
	// Provider, for a plugin that registers a model provider, returns the
	// provider name an entry registers given its decoded config (nil when
	// the plugin takes none). It lets config check resolve agents'
	// provider: without starting anything.
	Provider func(config any) string
	// SessionStore marks a plugin that persists sessions, which an
	// agent's session: needs.
	SessionStore bool
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Info{}
	validID    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)+$`)
)

// Register makes a plugin available to config entries. Call it from an
// init function. Like database/sql.Register it panics on a malformed or
// duplicate id: that is a defect of the binary, found the first time it
// starts, not an input error.
func Register(info Info) {
	if !validID.MatchString(info.ID) {
		panic(fmt.Sprintf("host.Register: plugin id %q is not namespaced lower-case (want e.g. \"admission.rate-limit\")", info.ID))
	}
	if info.Plugin == nil {
		panic(fmt.Sprintf("host.Register: plugin %q has no Plugin", info.ID))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[info.ID]; dup {
		panic(fmt.Sprintf("host.Register: plugin %q registered twice", info.ID))
	}
	registry[info.ID] = info
}

// Lookup returns the plugin registered under id.
func Lookup(id string) (Info, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	info, ok := registry[id]
	return info, ok
}

// Registered lists the registered plugins sorted by id.
func Registered() []Info {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Info, 0, len(registry))
	for _, info := range registry {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// nearest returns the registered id closest to id, if one is close.
func nearest(id string) string {
	best, bestDist := "", len(id)/2+2
	for _, info := range Registered() {
		if d := distance(id, info.ID); d < bestDist {
			best, bestDist = info.ID, d
		}
	}
	return best
}

// distance is the Levenshtein distance.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
