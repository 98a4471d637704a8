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

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/llm"
)

// Config is the configuration of llm.openai and llm.deepseek.
type Config struct {
	httpx.Common `koanf:",squash"`
	// Thinking turns DeepSeek's thinking mode on or off (unset: the
	// model's default).
	Thinking *bool `koanf:"thinking"`
	// ReasoningEffort is passed as reasoning_effort (low, medium, high).
	ReasoningEffort string `koanf:"reasoning_effort"`
	// Images says whether the model takes images (image_url parts):
	// unset, llm.openai does and llm.deepseek does not. Set it false for
	// a text-only model behind llm.openai (gpt-3.5, most local models),
	// so that entry points refuse images up front rather than the API.
	Images *bool `koanf:"images"`
}

// flavor holds what differs between the OpenAI and DeepSeek endpoints.
type flavor struct {
	id, name, baseURL, keyEnv string
	// window is the default context window in tokens.
	window int
	// images is whether the endpoint's models take images by default.
	images bool
	// sendReasoning sends an assistant message's reasoning back as
	// reasoning_content; DeepSeek rejects tool-call turns without it.
	sendReasoning bool
}

var (
	openAI   = flavor{id: "llm.openai", name: "openai", baseURL: "https://api.openai.com/v1", keyEnv: "OPENAI_API_KEY", window: 128000, images: true}
	deepSeek = flavor{id: "llm.deepseek", name: "deepseek", baseURL: "https://api.deepseek.com", keyEnv: "DEEPSEEK_API_KEY", window: 128000, sendReasoning: true}
)

// Plugin and DeepSeekPlugin register the providers.
var (
	Plugin         = register(openAI)
	DeepSeekPlugin = register(deepSeek)
)

// register registers flavor f under its id; the flavors share Config and
// differ only in what an unset key defaults to.
func register(f flavor) *plugin.Plugin[Config] {
	doc := fmt.Sprintf("model provider %q: OpenAI-compatible chat completions, streaming (%s)", f.name, f.baseURL)
	return plugin.Register(f.id, doc, func(ctx *dshctx.Context, cfg Config) error {
		p, err := New(f, cfg, os.Getenv)
		if err != nil {
			return err
		}
		p.client.Log = ctx.Logger()
		svc, err := llm.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, p.name, p)
	}, llm.Key).ProvidesModel(func(c Config) string {
		if c.Name != "" {
			return c.Name
		}
		return f.name
	})
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

// NewOpenAI builds an OpenAI provider outside a tree, for embedding and
// tests; getenv reads the API key.
func NewOpenAI(cfg Config, getenv func(string) string) (*Provider, error) {
	return New(openAI, cfg, getenv)
}

// NewDeepSeek builds a DeepSeek provider; see NewOpenAI.
func NewDeepSeek(cfg Config, getenv func(string) string) (*Provider, error) {
	return New(deepSeek, cfg, getenv)
}

// New builds a provider of flavor f.
func New(f flavor, cfg Config, getenv func(string) string) (*Provider, error) {
	s, err := cfg.Resolve(httpx.Defaults{ID: f.id, Name: f.name, BaseURL: f.baseURL, KeyEnv: f.keyEnv}, getenv)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	if s.Key != "" {
		header.Set("Authorization", "Bearer "+s.Key)
	}
	return &Provider{
		flavor: f, cfg: cfg, name: s.Name,
		url:    s.BaseURL + "/chat/completions",
		header: cfg.Header(header),
		client: s.Client,
	}, nil
}

// Name returns the provider name agents use.
func (p *Provider) Name() string { return p.name }

// ContextWindow returns context_window, else 128k tokens: the window of
// DeepSeek's chat models and of OpenAI's gpt-4o family (newer OpenAI
// models have larger ones; set context_window to use them).
func (p *Provider) ContextWindow(string) int { return p.cfg.Window(p.flavor.window) }

// Capabilities: images where the endpoint's models take them (the images
// option, else the flavor's default), and no PDFs: chat completions of
// OpenAI-compatible servers carry no documents (text files are inlined).
// The answer does not depend on the model; the images option says it for
// the configured one.
func (p *Provider) Capabilities(string) parts.Capabilities {
	images := p.flavor.images
	if p.cfg.Images != nil {
		images = *p.cfg.Images
	}
	return parts.Capabilities{Images: images}
}
