// Package systemprompt is the systemPrompt service: the system prompt as
// ordered sections with {{variables}}, some for every agent and some for one
// agent's scope, assembled through the system-prompt/assemble waterfall.
package systemprompt

import (
	stdctx "context"
	"fmt"
	"sort"
	"strings"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// Key is the service key.
var Key = dshctx.NewKey[*Service]("systemPrompt")

// Plugin provides the service.
var Plugin = dshctx.Define("systemPrompt", func(ctx *dshctx.Context, _ any) error {
	return Key.Provide(ctx, New())
})

// Assembly is the payload of system-prompt/assemble: the text rendered from
// the sections, for the agent whose scope the event is dispatched in.
type Assembly struct {
	AgentID string
	Text    string
}

// EventAssemble lets plugins rewrite the assembled prompt. The default
// returns the rendered text.
var EventAssemble = waterfall.New("system-prompt/assemble", func(_ stdctx.Context, a Assembly) (string, error) {
	return a.Text, nil
})

type section struct {
	name  string
	order int
	seq   int
	text  string
}

type scope struct {
	sections []*section
	vars     map[string]string
}

// Service holds the sections and variables by scope tag ("" is global).
type Service struct {
	mu     sync.Mutex
	seq    int
	scopes map[string]*scope
	// cache holds the rendered text per tag; any change clears it.
	cache map[string]string
}

// New returns an empty service.
func New() *Service { return &Service{scopes: map[string]*scope{}, cache: map[string]string{}} }

func (s *Service) scope(tag string) *scope {
	sc := s.scopes[tag]
	if sc == nil {
		sc = &scope{vars: map[string]string{}}
		s.scopes[tag] = sc
	}
	return sc
}

// Section adds a section in ctx's scope: global from outside any scope, one
// agent's from inside its scope. Sections render in ascending order, ties in
// registration order, separated by blank lines. It is removed with ctx's
// fiber.
func (s *Service) Section(ctx *dshctx.Context, name string, order int, text string) error {
	if name == "" {
		return errs.New(errs.InvalidArgument, "systemPrompt.Section: the section needs a name")
	}
	tag := ctx.Tag()
	_, err := ctx.Effect("system prompt section "+name, func() (dshctx.Disposer, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seq++
		sec := &section{name: name, order: order, seq: s.seq, text: text}
		sc := s.scope(tag)
		sc.sections = append(sc.sections, sec)
		clear(s.cache)
		return func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			sc.sections = deleteItem(sc.sections, sec)
			s.forgetIfEmpty(tag, sc)
			clear(s.cache)
			return nil
		}, nil
	})
	return err
}

// Variable sets {{name}} in ctx's scope; an agent's value shadows the global
// one. It is removed with ctx's fiber.
func (s *Service) Variable(ctx *dshctx.Context, name, value string) error {
	if name == "" {
		return errs.New(errs.InvalidArgument, "systemPrompt.Variable: the variable needs a name")
	}
	tag := ctx.Tag()
	_, err := ctx.Effect("system prompt variable "+name, func() (dshctx.Disposer, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		sc := s.scope(tag)
		if _, taken := sc.vars[name]; taken {
			return nil, errs.New(errs.ServiceConflict, fmt.Sprintf("system prompt variable %q is already set in this scope", name))
		}
		sc.vars[name] = value
		clear(s.cache)
		return func() error {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(sc.vars, name)
			s.forgetIfEmpty(tag, sc)
			clear(s.cache)
			return nil
		}, nil
	})
	return err
}

func (s *Service) forgetIfEmpty(tag string, sc *scope) {
	if tag != "" && len(sc.sections) == 0 && len(sc.vars) == 0 {
		delete(s.scopes, tag)
	}
}

// Render returns the prompt text for tag without running the waterfall.
func (s *Service) Render(tag string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if text, ok := s.cache[tag]; ok {
		return text
	}
	var secs []*section
	if g := s.scopes[""]; g != nil {
		secs = append(secs, g.sections...)
	}
	local := s.scopes[tag]
	if tag != "" && local != nil {
		secs = append(secs, local.sections...)
	}
	sort.SliceStable(secs, func(i, j int) bool {
		if secs[i].order != secs[j].order {
			return secs[i].order < secs[j].order
		}
		return secs[i].seq < secs[j].seq
	})
	parts := make([]string, 0, len(secs))
	for _, sec := range secs {
		if sec.text != "" {
			parts = append(parts, sec.text)
		}
	}
	text := s.substitute(strings.Join(parts, "\n\n"), local)
	s.cache[tag] = text
	return text
}

// substitute replaces {{name}} by the scope's value, else the global one.
// Unknown names are left as written, so a typo shows in the prompt.
func (s *Service) substitute(text string, local *scope) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(text[i:], "}}")
		if j < 0 {
			break
		}
		name := strings.TrimSpace(text[i+2 : i+j])
		b.WriteString(text[:i])
		if v, ok := s.lookup(name, local); ok {
			b.WriteString(v)
		} else {
			b.WriteString(text[i : i+j+2])
		}
		text = text[i+j+2:]
	}
	b.WriteString(text)
	return b.String()
}

func (s *Service) lookup(name string, local *scope) (string, bool) {
	if local != nil {
		if v, ok := local.vars[name]; ok {
			return v, true
		}
	}
	if g := s.scopes[""]; g != nil {
		v, ok := g.vars[name]
		return v, ok
	}
	return "", false
}

// Assemble renders the prompt for the scope of at and passes it through the
// system-prompt/assemble waterfall.
func (s *Service) Assemble(ctx stdctx.Context, at *dshctx.Context) (string, error) {
	return EventAssemble.Dispatch(ctx, at, Assembly{AgentID: at.Tag(), Text: s.Render(at.Tag())})
}

func deleteItem[T comparable](xs []T, x T) []T {
	for i, y := range xs {
		if y == x {
			return append(xs[:i:i], xs[i+1:]...)
		}
	}
	return xs
}
