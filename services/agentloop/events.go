package agentloop

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// RequestEvent is the payload of agent/request.
type RequestEvent struct {
	Agent   agents.Agent
	Turn    int
	Step    int
	Request llm.Request
}

// StepResult is the payload and result of agent/step-result: the assembled
// assistant message of one step, before it is recorded.
type StepResult struct {
	Agent   agents.Agent
	Turn    int
	Step    int
	Message llm.Message
	Usage   llm.Usage
	Finish  llm.FinishReason
}

// Continuation is the payload of agent/turn-continuation.
type Continuation struct {
	Agent agents.Agent
	Turn  int
	Step  int
	// ToolCalls is how many tool calls the step executed.
	ToolCalls int
	// Steering is how many steering messages arrived during the step.
	Steering int
	Finish   llm.FinishReason
}

// StreamChunk is the payload of agent/stream-chunk: one chunk of the model
// stream of a step, as it arrives. MessageID is the id the assembled
// assistant message gets in the session. The chunk's pointers may be
// shared with the provider: read them, never write them.
type StreamChunk struct {
	Agent     agents.Agent
	Turn      int
	Step      int
	MessageID string
	Chunk     llm.Chunk
}

// StopCheck is the payload of agent/stop. Step is the step about to ask
// the model, or the step whose answer was just recorded (Answered).
type StopCheck struct {
	Agent    agents.Agent
	Turn     int
	Step     int
	Answered bool
}

// Stop is agent/stop's answer: the zero Stop lets the turn go on; a Stop
// with a Reason ends it, recorded on turn/end as Reason with Message as
// its Error (what ran out, and what to do about it).
type Stop struct {
	Reason  string
	Message string
}

// Events of the agent loop, dispatched in the agent's scope.
var (
	// EventRequest may replace the model request of a step. Listeners get
	// the request by value with a read-only history, so changing their copy
	// never changes what another listener sees.
	EventRequest = waterfall.New("agent/request", func(_ stdctx.Context, e RequestEvent) (llm.Request, error) {
		return e.Request, nil
	})
	// EventStepResult may rewrite a step's assistant message before it is
	// recorded and its tools run.
	EventStepResult = waterfall.New("agent/step-result", func(_ stdctx.Context, r StepResult) (StepResult, error) {
		return r, nil
	})
	// EventStreamChunk is emitted for each chunk of a model stream, for
	// live listeners (a UI): chunks are not session events, and the log
	// records the assembled assistant/message instead. A slow listener
	// slows the stream; hand the chunk off if the work is heavy.
	EventStreamChunk = waterfall.NewEmit[StreamChunk]("agent/stream-chunk")
	// EventStop asks whether the running turn must stop now, before each
	// step's model request and after each step's answer is recorded (its
	// tool calls not run yet). A listener returns a Stop with a Reason to
	// end the turn, or next's answer to let it go on. It is how a budget
	// that ran out mid-turn ends it: the turn ends with the Stop's reason,
	// the way the output limit ends one with max-tokens, and the calls of
	// the step that was stopped are answered as not executed.
	EventStop = waterfall.New("agent/stop", func(_ stdctx.Context, _ StopCheck) (Stop, error) {
		return Stop{}, nil
	})
	// EventContinuation decides whether the turn takes another step. By
	// default it does when the step ran tools or steering arrived.
	EventContinuation = waterfall.New("agent/turn-continuation", func(_ stdctx.Context, c Continuation) (bool, error) {
		return c.ToolCalls > 0 || c.Steering > 0, nil
	})
)

// Listener signatures of the loop's events, so a plugin can name them.
type (
	// RequestListener may replace a step's model request; see EventRequest.
	RequestListener = waterfall.Listener[RequestEvent, llm.Request]
	// RequestNext passes a step's request on to the rest of agent/request.
	RequestNext = waterfall.Next[RequestEvent, llm.Request]
	// StepResultListener may rewrite a step's assistant message; see
	// EventStepResult.
	StepResultListener = waterfall.Listener[StepResult, StepResult]
	// StepResultNext passes a step's result on to the rest of
	// agent/step-result.
	StepResultNext = waterfall.Next[StepResult, StepResult]
	// ContinuationListener decides whether a turn takes another step; see
	// EventContinuation.
	ContinuationListener = waterfall.Listener[Continuation, bool]
	// ContinuationNext asks the rest of agent/turn-continuation, which ends
	// in the default decision.
	ContinuationNext = waterfall.Next[Continuation, bool]
	// StopListener may end a running turn; see EventStop.
	StopListener = waterfall.Listener[StopCheck, Stop]
	// StopNext asks the rest of agent/stop, which ends in "go on".
	StopNext = waterfall.Next[StopCheck, Stop]
	// StreamChunkListener hears each chunk of a model stream.
	StreamChunkListener = waterfall.EmitListener[StreamChunk]
)

// Turn end reasons, strongest first: when several apply, the turn reports
// the first of this list.
const (
	ReasonDisposed = "disposed"
	ReasonAborted  = "aborted"
	ReasonError    = "error"
	// ReasonBudget: a budget ran out during the turn (agent/stop, the
	// budget plugin); turn/end's Error says which and how to go on.
	ReasonBudget    = "budget"
	ReasonMaxTokens = "max-tokens"
	ReasonCompleted = "completed"
)

var precedence = map[string]int{ReasonDisposed: 6, ReasonAborted: 5, ReasonError: 4, ReasonBudget: 3, ReasonMaxTokens: 2, ReasonCompleted: 1}

// rank is a reason's precedence; a Stop's reason the loop does not know
// ranks with the budget's, the other stop a listener asks for.
func rank(r string) int {
	if n, ok := precedence[r]; ok {
		return n
	}
	return precedence[ReasonBudget]
}

// stronger returns the reason that wins between a and b.
func stronger(a, b string) string {
	if rank(b) > rank(a) {
		return b
	}
	return a
}
