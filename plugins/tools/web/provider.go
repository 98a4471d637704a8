package web

import (
	stdctx "context"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Query is one search the model asked for.
type Query struct {
	// Text is the search terms.
	Text string
	// Count is how many results to return, 1 to the configured maximum.
	Count int
}

// Hit is one search result.
type Hit struct {
	Title   string
	URL     string
	Snippet string
}

// Provider runs searches against one search API. Its errors are shown to
// the model: they must never carry the key.
type Provider interface {
	Search(ctx stdctx.Context, q Query) ([]Hit, error)
}

// ProviderConfig is what a provider is built from.
type ProviderConfig struct {
	// BaseURL is the API's endpoint: the configured search.base_url or
	// the provider's default.
	BaseURL string
	// Key is the API key, read from the environment.
	Key string
	// Client sends the requests; its timeout is search.timeout.
	Client *http.Client
}

// ProviderDef describes a provider to the registry.
type ProviderDef struct {
	// Name is what search.provider says.
	Name string
	// BaseURL is the default endpoint.
	BaseURL string
	// KeyEnv is the default environment variable of the key.
	KeyEnv string
	// MaxResults is the most results the API returns for one query.
	MaxResults int
	// New builds a provider.
	New func(ProviderConfig) Provider
}

var (
	providersMu sync.RWMutex
	providers   = map[string]ProviderDef{}
)

// RegisterProvider adds a provider, usually from an init function of the
// file that implements it. A second provider of the same name panics: two
// meanings of one config word would be a build mistake.
func RegisterProvider(d ProviderDef) {
	providersMu.Lock()
	defer providersMu.Unlock()
	if _, dup := providers[d.Name]; dup || d.Name == "" || d.New == nil || d.MaxResults < 1 {
		panic("web.RegisterProvider: bad or duplicate provider " + d.Name)
	}
	providers[d.Name] = d
}

// ProviderNames returns the registered providers' names, sorted.
func ProviderNames() []string {
	providersMu.RLock()
	defer providersMu.RUnlock()
	out := make([]string, 0, len(providers))
	for n := range providers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func lookupProvider(name string) (ProviderDef, bool) {
	providersMu.RLock()
	defer providersMu.RUnlock()
	d, ok := providers[strings.ToLower(strings.TrimSpace(name))]
	return d, ok
}
