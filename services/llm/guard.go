package llm

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
)

// guarded is a provider's stream whose panics become errors: provider code
// runs on the agent's driver goroutine, where a panic would end the process
// and every other agent with it.
type guarded struct {
	s               Stream
	provider, agent string
	// failed is the panic error, returned by every later Recv: a stream
	// that panicked is in no state to be read on.
	failed error
}

func (g *guarded) Recv() (c Chunk, err error) {
	if g.failed != nil {
		return Chunk{}, g.failed
	}
	defer func() {
		if p := recover(); p != nil {
			g.failed = panicError(g.provider, g.agent, "Recv", p)
			c, err = Chunk{}, g.failed
		}
	}()
	return g.s.Recv()
}

func (g *guarded) Close() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(g.provider, g.agent, "Close", p)
		}
	}()
	return g.s.Close()
}

// start calls p.Stream, turning a panic into an error.
func start(ctx stdctx.Context, p Provider, req Request) (s Stream, err error) {
	defer func() {
		if x := recover(); x != nil {
			s, err = nil, panicError(req.Provider, req.AgentID, "Stream", x)
		}
	}()
	return p.Stream(ctx, req)
}

func panicError(provider, agent, where string, p any) error {
	return errs.New(ProviderPanic, fmt.Sprintf(
		"model provider %q panicked in %s for agent %q: %v; the turn ended, the agent keeps serving — this is a bug in the provider, report it to its plugin's author",
		provider, where, agent, p)).WithReason(PanicReason)
}
