// Package openai is the model provider for OpenAI's chat completions API and
// the servers that speak it: OpenAI itself (llm.openai), DeepSeek
// (llm.deepseek), and local servers such as Ollama and vLLM (llm.openai
// with their base_url).
//
// The stream is decoded here rather than through a client library: the
// libraries end quietly on a stream cut before [DONE], do not carry
// DeepSeek's reasoning_content back with the tool calls it led to nor its
// cache-hit usage fields, and retry on their own terms; dsh needs each of
// those exactly, and a decoder small enough to fuzz.
package openai

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/services/llm"
)

// Config is the configuration of llm.openai and llm.deepseek.
type Config struct {
	// Name is the provider name agents use (default "openai" or
	// "deepseek").
	Name string `koanf:"name"`
	// BaseURL is the API root; /chat/completions is appended.
	BaseURL string `koanf:"base_url"`
	// APIKeyEnv names the environment variable holding the API key. Empty
	// sends no key, for local servers. The key itself is never logged.
	APIKeyEnv string `koanf:"api_key_env"`
	// Model is used when the agent names none.
	Model string `koanf:"model"`
	// MaxTokens bounds each answer when the agent sets no max_tokens.
	MaxTokens   int      `koanf:"max_tokens"`
	Temperature *float64 `koanf:"temperature"`
	// Timeout bounds the wait for the response headers (default 60s).
	Timeout time.Duration `koanf:"timeout"`
	// Headers are added to every request.
	Headers map[string]string `koanf:"headers"`
	// Retries is how often a 429 or 5xx before the stream is retried
	// (default 3; -1 for none).
	Retries int `koanf:"retries"`
	// RetryBackoff is the first retry's delay bound (default 500ms).
	RetryBackoff time.Duration `koanf:"retry_backoff"`
	// Thinking turns DeepSeek's thinking mode on or off (unset: the
	// model's default).
	Thinking *bool `koanf:"thinking"`
	// ReasoningEffort is passed as reasoning_effort (low, medium, high).
	ReasoningEffort string `koanf:"reasoning_effort"`
}

// flavor holds what differs between the OpenAI and DeepSeek endpoints.
type flavor struct {
	id, name, baseURL, keyEnv string
	// sendReasoning sends an assistant message's reasoning back as
	// reasoning_content; DeepSeek rejects tool-call turns without it.
	sendReasoning bool
}

var (
	openAI   = flavor{id: "llm.openai", name: "openai", baseURL: "https://api.openai.com/v1", keyEnv: "OPENAI_API_KEY"}
	deepSeek = flavor{id: "llm.deepseek", name: "deepseek", baseURL: "https://api.deepseek.com", keyEnv: "DEEPSEEK_API_KEY", sendReasoning: true}
)

func init() {
	for _, f := range []flavor{openAI, deepSeek} {
		host.Register(host.Info{
			ID:     f.id,
			Doc:    fmt.Sprintf("model provider %q: OpenAI-compatible chat completions, streaming (%s)", f.name, f.baseURL),
			Plugin: plugin(f),
			Config: func() any { return &Config{} },
		})
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Timeout < 0 || c.RetryBackoff < 0 {
		return fmt.Errorf("timeout and retry_backoff cannot be negative")
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("max_tokens cannot be negative")
	}
	if c.BaseURL != "" && !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		return fmt.Errorf("base_url %q must start with http:// or https://", c.BaseURL)
	}
	return nil
}

// Plugin and DeepSeekPlugin register the providers.
var (
	Plugin         = plugin(openAI)
	DeepSeekPlugin = plugin(deepSeek)
)

func plugin(f flavor) dshctx.Plugin {
	return dshctx.Define(f.id, func(ctx *dshctx.Context, config any) error {
		cfg, err := dshctx.ConfigAs[Config](f.id, config)
		if err != nil {
			return err
		}
		p, err := New(f, cfg, os.Getenv)
		if err != nil {
			return err
		}
		svc, err := llm.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, p.name, p)
	}, llm.Key)
}

// Provider streams chat completions.
type Provider struct {
	flavor flavor
	cfg    Config
	name   string
	url    string
	header http.Header
	client *httpx.Client
}

// NewOpenAI and NewDeepSeek build providers outside a tree, for embedding
// and tests; getenv reads the API key.
func NewOpenAI(cfg Config, getenv func(string) string) (*Provider, error) {
	return New(openAI, cfg, getenv)
}

// NewDeepSeek builds a DeepSeek provider; see NewOpenAI.
func NewDeepSeek(cfg Config, getenv func(string) string) (*Provider, error) {
	return New(deepSeek, cfg, getenv)
}

// New builds a provider of flavor f.
func New(f flavor, cfg Config, getenv func(string) string) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, errs.New(errs.InvalidArgument, f.id+": "+err.Error())
	}
	name := cfg.Name
	if name == "" {
		name = f.name
	}
	base := cfg.BaseURL
	if base == "" {
		base = f.baseURL
	}
	keyEnv := cfg.APIKeyEnv
	if keyEnv == "" && cfg.BaseURL == "" {
		keyEnv = f.keyEnv // the hosted API needs its key
	}
	header := http.Header{}
	if keyEnv != "" {
		key := getenv(keyEnv)
		if key == "" {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
				"%s: the environment variable %s is empty; set it to your API key (or set api_key_env: to the variable that holds it)", f.id, keyEnv))
		}
		header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range cfg.Headers {
		header.Set(k, v)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	retries := cfg.Retries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 0
	}
	return &Provider{
		flavor: f, cfg: cfg, name: name,
		url:    strings.TrimSuffix(base, "/") + "/chat/completions",
		header: header,
		client: &httpx.Client{
			Provider: name, KeyEnv: keyEnv, HTTP: http.DefaultClient,
			Retries: retries, Backoff: cfg.RetryBackoff, HeaderTimeout: timeout,
		},
	}, nil
}

// Name returns the provider name agents use.
func (p *Provider) Name() string { return p.name }
