// Package systemprompt is the systemPrompt service: the system prompt as
// ordered sections with {{variables}}, some for every agent and some for one
// agent's scope (each agent's scope holds a service of its own), assembled through the system-prompt/assemble waterfall.
package systemprompt

import (
	stdctx "context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// Key is the service key.
var Key = dshctx.NewKey[*Service]("systemPrompt")

// Plugin provides the service.
var Plugin = dshctx.Define("systemPrompt", func(ctx *dshctx.Context, _ dshctx.None) error {
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
	seq   int64
	text  string
}

// Service is the sections and variables of one scope. The root's service
// holds what every agent gets; an agent's scope gets a service of its own,
// made on its first section or variable and provided in that scope, which
// renders its own entries over the ones around it and leaves with the
// scope.
type Service struct {
	parent *Service
	// gen counts changes across the root and every service under it: a
	// change outside an agent's scope makes its cached text stale too.
	gen *atomic.Int64

	mu       sync.Mutex
	sections []*section
	vars     map[string]string
	cached   string
	cachedAt int64 // gen when cached was rendered; 0 means never
}

// New returns an empty service.
func New() *Service {
	return &Service{gen: new(atomic.Int64), vars: map[string]string{}}
}

// own returns the service of ctx's scope, providing one there first if the
// scope has none: outside any agent's scope that is s itself.
func (s *Service) own(ctx *dshctx.Context) (*Service, error) {
	if ctx.Tag() == "" {
		return s, nil
	}
	return Key.Own(ctx, func() *Service { return &Service{parent: s, gen: s.gen, vars: map[string]string{}} })
}

// seenFrom returns the service of at's scope when it was made under s, and
// s otherwise.
func (s *Service) seenFrom(at *dshctx.Context) *Service {
	if at.Tag() != "" {
		if in, ok := Key.Local(at); ok && in.parent == s {
			return in
		}
	}
	return s
}

// Section adds a section in ctx's scope: global from outside any scope, one
// agent's from inside its scope. Sections render in ascending order, ties in
// registration order, separated by blank lines. It is removed with ctx's
// fiber.
func (s *Service) Section(ctx *dshctx.Context, name string, order int, text string) error {
	if name == "" {
		return errs.New(errs.InvalidArgument, "systemPrompt.Section: the section needs a name")
	}
	in, err := s.own(ctx)
	if err != nil {
		return err
	}
	_, err = ctx.Effect("system prompt section "+name, func() (dshctx.Disposer, error) {
		sec := &section{name: name, order: order, seq: in.gen.Add(1), text: text}
		in.mu.Lock()
		in.sections = append(in.sections, sec)
		in.mu.Unlock()
		// After the change, so a render that read gen before it cannot
		// cache text without the section.
		in.gen.Add(1)
		return func() error {
			in.mu.Lock()
			in.sections = deleteItem(in.sections, sec)
			in.mu.Unlock()
			in.gen.Add(1)
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
	in, err := s.own(ctx)
	if err != nil {
		return err
	}
	_, err = ctx.Effect("system prompt variable "+name, func() (dshctx.Disposer, error) {
		in.mu.Lock()
		defer in.mu.Unlock()
		if _, taken := in.vars[name]; taken {
			return nil, errs.New(errs.ServiceConflict, fmt.Sprintf("system prompt variable %q is already set in this scope", name))
		}
		in.vars[name] = value
		in.gen.Add(1)
		return func() error {
			in.mu.Lock()
			delete(in.vars, name)
			in.mu.Unlock()
			in.gen.Add(1)
			return nil
		}, nil
	})
	return err
}

// Render returns the prompt text for at's scope without running the
// waterfall.
func (s *Service) Render(at *dshctx.Context) string {
	return s.seenFrom(at).render()
}

func (s *Service) render() string {
	gen := s.gen.Load()
	s.mu.Lock()
	if s.cachedAt == gen && gen != 0 {
		text := s.cached
		s.mu.Unlock()
		return text
	}
	s.mu.Unlock()

	var secs []*section
	var chain []*Service
	for in := s; in != nil; in = in.parent {
		in.mu.Lock()
		secs = append(secs, in.sections...)
		in.mu.Unlock()
		chain = append(chain, in)
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
	text := substitute(strings.Join(parts, "\n\n"), chain)

	s.mu.Lock()
	// A change that raced with rendering moved gen on: keep the text
	// uncached so the next call renders again.
	if s.gen.Load() == gen {
		s.cached, s.cachedAt = text, gen
	}
	s.mu.Unlock()
	return text
}

// substitute replaces {{name}} by the nearest scope's value. Unknown names
// are left as written, so a typo shows in the prompt.
func substitute(text string, chain []*Service) string {
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
		if v, ok := lookup(name, chain); ok {
			b.WriteString(v)
		} else {
			b.WriteString(text[i : i+j+2])
		}
		text = text[i+j+2:]
	}
	b.WriteString(text)
	return b.String()
}

func lookup(name string, chain []*Service) (string, bool) {
	for _, in := range chain {
		in.mu.Lock()
		v, ok := in.vars[name]
		in.mu.Unlock()
		if ok {
			return v, true
		}
	}
	return "", false
}

// Assemble renders the prompt for the scope of at and passes it through the
// system-prompt/assemble waterfall.
func (s *Service) Assemble(ctx stdctx.Context, at *dshctx.Context) (string, error) {
	return EventAssemble.Dispatch(ctx, at, Assembly{AgentID: at.Tag(), Text: s.Render(at)})
}

func deleteItem[T comparable](xs []T, x T) []T {
	for i, y := range xs {
		if y == x {
			return append(xs[:i:i], xs[i+1:]...)
		}
	}
	return xs
}
