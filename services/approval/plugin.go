package approval

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/agents"
)

// Key is the service key.
var Key = dshctx.NewKey[*Service]("approval")

// Plugin provides the service. It reads the agents service to emit its
// notifications in each agent's scope, and forgets an agent's "allow for
// this session" answers when agent/disposed says the agent is gone, so an
// agent created later under the same id starts with none.
var Plugin = dshctx.Define("approval", func(ctx *dshctx.Context, _ dshctx.None) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	s := &Service{home: ctx, agents: reg}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error {
		s.Forget(a.ID())
		return nil
	}); err != nil {
		return err
	}
	return Key.Provide(ctx, s)
}, agents.Key)

// scopeOf returns where notifications about agentID are emitted: the
// agent's scope when it is a live agent, else the service's own context
// (whose listeners outside any scope still hear them); nil for a Service
// not made by Plugin.
func (s *Service) scopeOf(agentID string) *dshctx.Context {
	if s.agents != nil {
		if a, ok := s.agents.Get(agentID); ok {
			return a.Context()
		}
	}
	return s.home
}

func (s *Service) emitRequested(req Request) {
	if at := s.scopeOf(req.AgentID); at != nil {
		_ = EventRequested.Emit(stdctx.Background(), at, req)
	}
}

func (s *Service) emitAnswered(a Answered) {
	if at := s.scopeOf(a.Request.AgentID); at != nil {
		_ = EventAnswered.Emit(stdctx.Background(), at, a)
	}
}
