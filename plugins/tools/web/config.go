package web

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/dsh-go/dsh/internal/egress"
)

// Names of the tools, in the order they register.
const (
	FetchTool  = "web_fetch"
	SearchTool = "web_search"
)

// NetworkKey is the key path refusals of web_fetch name, so a person knows
// which setting to change.
const NetworkKey = "tools.web.network"

// Config is the plugin's configuration. A limit left at zero takes its
// default.
type Config struct {
	// Tools lists the tools to register: web_fetch, web_search. Empty
	// means web_fetch, and web_search too when search.provider is set.
	Tools []string `koanf:"tools" json:"tools,omitempty"`
	// Network is the egress policy of web_fetch, in the language of the
	// bash sandbox's sandbox.network: on (default: every internet host,
	// no local address), or {allow: [...], deny: [...]}.
	Network any `koanf:"network" json:"network,omitempty"`
	// Timeout bounds one fetch, redirects and body included.
	Timeout time.Duration `koanf:"timeout" json:"timeout,omitempty"`
	// MaxBodyBytes caps the bytes of a response body read (after
	// decompression); the rest is not downloaded.
	MaxBodyBytes int64 `koanf:"max_body_bytes" json:"max_body_bytes,omitempty"`
	// MaxOutputBytes caps the text the model reads (the Markdown of a
	// page, or the text of a plain-text answer).
	MaxOutputBytes int `koanf:"max_output_bytes" json:"max_output_bytes,omitempty"`
	// MaxRedirects caps the redirects one fetch follows; each hop is
	// checked by the policy again.
	MaxRedirects int `koanf:"max_redirects" json:"max_redirects,omitempty"`
	// UserAgent is sent with every fetch.
	UserAgent string `koanf:"user_agent" json:"user_agent,omitempty"`
	// Search configures web_search.
	Search SearchConfig `koanf:"search" json:"search"`
	// Inherit: where a tools.web around this scope (the root's) already
	// gives the agent a tool, keep that one rather than shadow it. The
	// built-in modes set it, so a network policy the config put on the
	// root is not replaced by the mode's default.
	Inherit bool `koanf:"inherit" json:"inherit,omitempty"`
}

// SearchConfig says which provider web_search asks.
type SearchConfig struct {
	// Provider names a registered provider (brave, tavily); "" leaves
	// web_search off.
	Provider string `koanf:"provider" json:"provider,omitempty"`
	// APIKeyEnv names the environment variable holding the provider's
	// key; default the provider's own (BRAVE_API_KEY, TAVILY_API_KEY).
	APIKeyEnv string `koanf:"api_key_env" json:"api_key_env,omitempty"`
	// BaseURL replaces the provider's endpoint (a proxy, a test server).
	BaseURL string `koanf:"base_url" json:"base_url,omitempty"`
	// MaxResults caps the count argument (default 10, at most the
	// provider's own maximum).
	MaxResults int `koanf:"max_results" json:"max_results,omitempty"`
	// Timeout bounds one search.
	Timeout time.Duration `koanf:"timeout" json:"timeout,omitempty"`
}

// Defaults: the internet but no local address, 30 s and 5 MiB per fetch,
// 100000 bytes of text to the model, 5 redirects; searches of 15 s, at most
// 10 results.
func (Config) Defaults() Config {
	return Config{
		Timeout:        30 * time.Second,
		MaxBodyBytes:   5 << 20,
		MaxOutputBytes: 100000,
		MaxRedirects:   5,
		UserAgent:      "dsh-web_fetch/1 (+https://github.com/dsh-go/dsh)",
		Search:         SearchConfig{MaxResults: 10, Timeout: 15 * time.Second},
	}
}

// withDefaults fills the limits left at zero, for a config built in Go.
func (c Config) withDefaults() Config {
	d := Config{}.Defaults()
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = d.MaxOutputBytes
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = d.MaxRedirects
	}
	if c.UserAgent == "" {
		c.UserAgent = d.UserAgent
	}
	if c.Search.MaxResults == 0 {
		c.Search.MaxResults = d.Search.MaxResults
	}
	if c.Search.Timeout == 0 {
		c.Search.Timeout = d.Search.Timeout
	}
	return c
}

// enabled returns the tools the config turns on.
func (c Config) enabled() []string {
	if len(c.Tools) > 0 {
		return c.Tools
	}
	if c.Search.Provider != "" {
		return []string{FetchTool, SearchTool}
	}
	return []string{FetchTool}
}

// policy decodes network; unset means on. (The default is not written
// into Defaults: the config decoder would then take network for a string
// and refuse the map form.)
func (c Config) policy() (egress.Policy, error) {
	if c.Network == nil {
		return egress.ParsePolicy(NetworkKey, "on")
	}
	return egress.ParsePolicy(NetworkKey, c.Network)
}

// Validate checks the tool names, the limits, the policy and the provider.
// It reads no environment: the key is looked up when the plugin starts,
// so `dsh config check` passes on a machine without it.
func (c Config) Validate() error {
	c = c.withDefaults()
	for i, n := range c.Tools {
		if n != FetchTool && n != SearchTool {
			return fmt.Errorf("tools[%d]: %q is not a tool of tools.web; use %s or %s", i, n, FetchTool, SearchTool)
		}
	}
	switch {
	case c.Timeout < 0:
		return fmt.Errorf("timeout is %s; set a positive duration such as 30s", c.Timeout)
	case c.MaxBodyBytes < 1024:
		return fmt.Errorf("max_body_bytes is %d; set at least 1024", c.MaxBodyBytes)
	case c.MaxOutputBytes < 256:
		return fmt.Errorf("max_output_bytes is %d; set at least 256", c.MaxOutputBytes)
	case c.MaxRedirects < 0 || c.MaxRedirects > 20:
		return fmt.Errorf("max_redirects is %d; set a number from 0 to 20 (0 leaves the default, 5)", c.MaxRedirects)
	case c.Search.Timeout < 0:
		return fmt.Errorf("search.timeout is %s; set a positive duration such as 15s", c.Search.Timeout)
	case c.Search.MaxResults < 0:
		return fmt.Errorf("search.max_results is %d; set a positive number such as 10", c.Search.MaxResults)
	}
	on := c.enabled()
	if slices.Contains(on, FetchTool) {
		p, err := c.policy()
		if err != nil {
			return err
		}
		if p.Mode == egress.ModeOff {
			return fmt.Errorf("network is off, so web_fetch could reach nothing; set network: on, or {allow: [hosts]}, or leave web_fetch out of tools")
		}
	}
	if slices.Contains(on, SearchTool) {
		if c.Search.Provider == "" {
			return fmt.Errorf("tools lists web_search but search.provider is not set; set it to one of %s", strings.Join(ProviderNames(), ", "))
		}
	}
	if c.Search.Provider != "" {
		def, ok := lookupProvider(c.Search.Provider)
		if !ok {
			return fmt.Errorf("search.provider is %q; use one of %s", c.Search.Provider, strings.Join(ProviderNames(), ", "))
		}
		if c.Search.MaxResults > def.MaxResults {
			return fmt.Errorf("search.max_results is %d, over %s's maximum of %d", c.Search.MaxResults, c.Search.Provider, def.MaxResults)
		}
		if c.Search.BaseURL != "" {
			u, err := url.Parse(c.Search.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("search.base_url is %q; write an http or https URL such as %s", c.Search.BaseURL, def.BaseURL)
			}
		}
		if c.Search.APIKeyEnv != "" && strings.ContainsAny(c.Search.APIKeyEnv, "$= \t") {
			return fmt.Errorf("search.api_key_env is %q; write the variable's name only, such as %s", c.Search.APIKeyEnv, def.KeyEnv)
		}
	}
	return nil
}
