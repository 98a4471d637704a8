package httpx

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// Common is the configuration every HTTP model provider shares. Provider
// configs embed it (koanf squashes it into their own keys).
type Common struct {
	// Name is the provider name agents use; each provider has a default.
	Name string `koanf:"name"`
	// BaseURL is the API root.
	BaseURL string `koanf:"base_url"`
	// APIKeyEnv names the environment variable holding the API key
	// (default: the provider's own, such as DEEPSEEK_API_KEY, also with a
	// base_url; "none" sends no key). The key itself is never logged.
	APIKeyEnv string `koanf:"api_key_env"`
	// Model is used when the agent names none.
	Model string `koanf:"model"`
	// MaxTokens bounds each answer when the agent sets no max_tokens.
	MaxTokens   int      `koanf:"max_tokens"`
	Temperature *float64 `koanf:"temperature"`
	// Timeout bounds the wait for the response headers (default 60s).
	Timeout time.Duration `koanf:"timeout"`
	// IdleTimeout bounds each wait for more of the stream once it has
	// started (default 60s): a server that goes silent fails the turn
	// instead of holding it forever.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// Headers are added to every request.
	Headers map[string]string `koanf:"headers"`
	// ContextWindow is the model's context window in tokens, for plugins
	// that keep requests within it (session.compact); 0 means the
	// provider's default.
	ContextWindow int `koanf:"context_window"`
	// Retries is how often a 429 or 5xx before the stream is retried
	// (default 3; -1 for none).
	Retries int `koanf:"retries"`
	// RetryBackoff is the first retry's delay bound (default 500ms).
	RetryBackoff time.Duration `koanf:"retry_backoff"`
}

// Validate checks the shared settings.
func (c Common) Validate() error {
	if c.Timeout < 0 || c.IdleTimeout < 0 || c.RetryBackoff < 0 {
		return fmt.Errorf("timeout, idle_timeout and retry_backoff cannot be negative")
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("max_tokens cannot be negative")
	}
	if c.ContextWindow < 0 {
		return fmt.Errorf("context_window cannot be negative; leave it out for the provider's default")
	}
	if c.BaseURL != "" && !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		return fmt.Errorf("base_url %q must start with http:// or https://", c.BaseURL)
	}
	return nil
}

// Defaults are what a provider fills in when the config leaves it out.
type Defaults struct {
	// ID is the plugin id, for errors ("llm.deepseek").
	ID, Name, BaseURL, KeyEnv string
}

// Setup is the resolved shared configuration.
type Setup struct {
	Name, BaseURL, Model string
	// Key is the API key; KeyEnv where it came from.
	Key, KeyEnv string
	Client      *Client
}

// NoKey is the api_key_env value that sends no key, for a server behind a
// base_url that must not see the provider's default key variable.
const NoKey = "none"

// DefaultTimeout is the default of timeout and idle_timeout.
const DefaultTimeout = 60 * time.Second

// Resolve applies defaults, reads the API key through getenv and builds
// the client. The key variable is the configured one, else the provider's
// default. It is required when named or when the hosted API is used; with
// a base_url (a proxy, a local server) the default variable is used when
// set, so a proxy still gets the key, and a server that needs none works
// without it.
func (c Common) Resolve(d Defaults, getenv func(string) string) (Setup, error) {
	if err := c.Validate(); err != nil {
		return Setup{}, errs.New(errs.InvalidArgument, d.ID+": "+err.Error())
	}
	s := Setup{Name: c.Name, BaseURL: strings.TrimSuffix(c.BaseURL, "/"), Model: c.Model, KeyEnv: c.APIKeyEnv}
	if s.Name == "" {
		s.Name = d.Name
	}
	if s.BaseURL == "" {
		s.BaseURL = d.BaseURL
	}
	required := s.KeyEnv != "" || c.BaseURL == ""
	switch s.KeyEnv {
	case NoKey:
		s.KeyEnv, required = "", false
	case "":
		s.KeyEnv = d.KeyEnv
	}
	if s.KeyEnv != "" {
		s.Key = getenv(s.KeyEnv)
		if s.Key == "" && required {
			return Setup{}, errs.New(errs.InvalidArgument, fmt.Sprintf(
				"%s: the environment variable %s is empty; set it to your API key (or set api_key_env: to the variable that holds it)", d.ID, s.KeyEnv))
		}
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	idle := c.IdleTimeout
	if idle == 0 {
		idle = DefaultTimeout
	}
	retries := c.Retries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 0
	}
	s.Client = &Client{
		Provider: s.Name, KeyEnv: s.KeyEnv, KeySent: s.Key != "", HTTP: http.DefaultClient,
		Retries: retries, Backoff: c.RetryBackoff, HeaderTimeout: timeout, IdleTimeout: idle,
	}
	return s, nil
}

// Header returns the configured extra headers on top of base.
func (c Common) Header(base http.Header) http.Header {
	for k, v := range c.Headers {
		base.Set(k, v)
	}
	return base
}

// Window returns the configured context window, else def.
func (c Common) Window(def int) int {
	if c.ContextWindow > 0 {
		return c.ContextWindow
	}
	return def
}
