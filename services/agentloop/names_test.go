package agentloop_test

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// The exported listener names must stay the exact types each event's On
// takes, or a plugin that names its listener stops compiling.
var (
	_ func(*dshctx.Context, agentloop.RequestListener, ...waterfall.Option) (func(), error)      = agentloop.EventRequest.On
	_ func(*dshctx.Context, agentloop.StepResultListener, ...waterfall.Option) (func(), error)   = agentloop.EventStepResult.On
	_ func(*dshctx.Context, agentloop.ContinuationListener, ...waterfall.Option) (func(), error) = agentloop.EventContinuation.On
	_ func(*dshctx.Context, agentloop.StreamChunkListener, ...waterfall.Option) (func(), error)  = agentloop.EventStreamChunk.On
	_ agentloop.RequestListener                                                                  = func(ctx stdctx.Context, e agentloop.RequestEvent, next agentloop.RequestNext) (llm.Request, error) {
		return next.Call(ctx, e)
	}
)
