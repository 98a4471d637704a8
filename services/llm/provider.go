package llm

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// Codes of the model service.
const (
	// ProviderUnknown: a request names a provider nobody registered.
	ProviderUnknown errs.Code = "LLM_PROVIDER_UNKNOWN"
	// ProviderFailed: the provider could not start or continue a stream.
	ProviderFailed errs.Code = "LLM_PROVIDER_FAILED"
	// ProviderPanic: a provider panicked while starting, reading or closing
	// a stream; its reason is PanicReason.
	ProviderPanic errs.Code = "LLM_PROVIDER_PANIC"
	// Refused starts the error text of a finish where the model declined
	// to answer (Anthropic's stop_reason refusal, OpenAI's finish_reason
	// content_filter), so an entry point can tell a refusal from a
	// failure: ACP answers it with stopReason refusal.
	Refused errs.Code = "LLM_REFUSED"
)

// PanicReason is the reason of a ProviderPanic error.
const PanicReason = "llm/panic"

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is one model call. It is a value: a listener of agent/request that
// changes its copy and returns it replaces the request without touching the
// one it was handed; History is read-only.
type Request struct {
	// AgentID is the agent the call is for; providers may key state on it.
	AgentID string
	// Provider names the registered provider to call.
	Provider string
	// Model is the provider's model name.
	Model       string
	System      string
	History     History
	Tools       []ToolSpec
	MaxTokens   int
	Temperature *float64
	// Limits bound the response; the service enforces them on every
	// provider's stream (see Limits; zero fields take the defaults).
	Limits Limits
}

// Stream yields the chunks of one model call. Recv returns io.EOF after the
// last chunk. Close releases the stream early and is safe to call twice.
type Stream interface {
	Recv() (Chunk, error)
	Close() error
}

// Provider is a model adapter.
type Provider interface {
	Stream(ctx stdctx.Context, req Request) (Stream, error)
}

// Key is the service key of the model service.
var Key = dshctx.NewKey[*Service]("llm")

// Service is the registry of providers of one scope. Providers registered
// in an agent's scope (by a preset) go to a service of that scope's own,
// which falls back to the one around it: the agent sees them, others do not.
type Service struct {
	parent    *Service
	mu        sync.RWMutex
	providers map[string]Provider
}

// In returns the service that the code in at's scope sees: its own when it
// has one, s otherwise.
func (s *Service) In(at *dshctx.Context) *Service {
	if at.Tag() != "" {
		if in, ok := Key.Local(at); ok && in.parent == s {
			return in
		}
	}
	return s
}

// NewService returns an empty registry.
func NewService() *Service { return &Service{providers: map[string]Provider{}} }

// Plugin provides the llm service.
var Plugin = dshctx.Define("llm", func(ctx *dshctx.Context, _ dshctx.None) error {
	return Key.Provide(ctx, NewService())
})

// Register makes p callable as name, in ctx's scope, for as long as ctx's
// fiber lives. One registered in an agent's scope shadows a provider of the
// same name for that agent only.
func (s *Service) Register(ctx *dshctx.Context, name string, p Provider) error {
	if name == "" || p == nil {
		return errs.New(errs.InvalidArgument, "llm.Register: a provider needs a name and a non-nil value")
	}
	if ctx.Tag() != "" {
		in, err := Key.Own(ctx, func() *Service { return &Service{parent: s, providers: map[string]Provider{}} })
		if err != nil {
			return err
		}
		s = in
	}
	_, err := ctx.Effect("llm provider "+name, func() (dshctx.Disposer, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, taken := s.providers[name]; taken {
			return nil, errs.New(errs.ServiceConflict, fmt.Sprintf("llm provider %q is already registered; give the second one another name", name))
		}
		s.providers[name] = p
		return func() error {
			s.mu.Lock()
			delete(s.providers, name)
			s.mu.Unlock()
			return nil
		}, nil
	})
	return err
}

// Names lists the registered providers, sorted.
func (s *Service) Names() []string {
	var out []string
	for in := s; in != nil; in = in.parent {
		in.mu.RLock()
		for n := range in.providers {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		in.mu.RUnlock()
	}
	sort.Strings(out)
	return out
}

// Provider returns the provider registered as name, in this scope or an
// enclosing one: for an entry point that asks what it takes (see
// plugins/llm/parts), never to call it around the service's Stream.
func (s *Service) Provider(name string) (Provider, bool) {
	for in := s; in != nil; in = in.parent {
		in.mu.RLock()
		p := in.providers[name]
		in.mu.RUnlock()
		if p != nil {
			return p, true
		}
	}
	return nil, false
}

// Stream starts a model call with the provider the request names. A panic
// of the provider, in Stream or later in the stream's Recv or Close, comes
// back as a ProviderPanic error instead of ending the process. The stream
// holds to req.Limits: past a bound it stops reading the provider and ends
// (see bounded).
func (s *Service) Stream(ctx stdctx.Context, req Request) (Stream, error) {
	p, ok := s.Provider(req.Provider)
	if !ok {
		known := s.Names()
		return nil, errs.New(ProviderUnknown, fmt.Sprintf(
			"agent %q asks for model provider %q, which is not registered (registered: %s); load its plugin or fix the agent's provider",
			req.AgentID, req.Provider, orNone(known)))
	}
	st, err := start(ctx, p, req)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, errs.New(ProviderFailed, fmt.Sprintf(
			"model provider %q returned neither a stream nor an error for agent %q; this is a bug in the provider", req.Provider, req.AgentID))
	}
	return newBounded(&guarded{s: st, provider: req.Provider, agent: req.AgentID}, req.Limits), nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
