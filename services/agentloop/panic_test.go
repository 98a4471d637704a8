package agentloop_test

import (
	stdctx "context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// TestAPanickingProviderEndsTheTurnNotTheProcess: a provider that panics
// while streaming ends that turn "error" with LLM_PROVIDER_PANIC naming it,
// and the agent serves its next message.
func TestAPanickingProviderEndsTheTurnNotTheProcess(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	var calls atomic.Int32
	e.registerProvider("fragile", providerFunc(func(stdctx.Context, llm.Request) (llm.Stream, error) {
		if calls.Add(1) == 1 {
			return panicStream{}, nil
		}
		return &sliceStream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "fine"}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
	}))
	var mu sync.Mutex
	var reported []error
	agents.EventError.On(e.root, func(_ stdctx.Context, r agents.ErrorReport) error {
		mu.Lock()
		reported = append(reported, r.Err)
		mu.Unlock()
		return nil
	})
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "fragile"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	a := h.Agent
	a.Followup(user("one"))
	idle(t, a)
	a.Followup(user("two"))
	idle(t, a)
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"error", "completed"}) {
		t.Fatalf("turn ends %v", ends)
	}
	for _, ev := range a.Session().Events(1) {
		if ev.Type == session.TurnEnd && ev.Reason == "error" && !strings.Contains(ev.Error, `"fragile"`) {
			t.Fatalf("the turn's error does not name the provider: %q", ev.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errs.Has(reported[0], llm.ProviderPanic, llm.PanicReason) {
		t.Fatalf("reported %v; want one %s (%s)", reported, llm.ProviderPanic, llm.PanicReason)
	}
}

type panicStream struct{}

func (panicStream) Recv() (llm.Chunk, error) { panic("decoder bug") }
func (panicStream) Close() error             { return nil }
