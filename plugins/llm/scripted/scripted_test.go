package scripted_test

import (
	stdctx "context"
	"errors"
	"io"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/llm"
)

func collect(t *testing.T, p *scripted.Provider, req llm.Request) llm.Message {
	t.Helper()
	s, err := p.Stream(stdctx.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var a llm.Assembler
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(c)
	}
	return a.Message()
}

func TestRepliesInOrderPerAgent(t *testing.T) {
	p, err := scripted.New(scripted.Config{Replies: []scripted.Reply{{Text: "one"}, {Text: "two"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, agent := range []string{"a", "a", "b", "a"} {
		got = append(got, agent+":"+collect(t, p, llm.Request{AgentID: agent}).Content)
	}
	if want := "[a:one a:two b:one a:one]"; fmtSlice(got) != want {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestEchoWithoutReplies(t *testing.T) {
	p, _ := scripted.New(scripted.Config{})
	m := collect(t, p, llm.Request{History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "ping"})})
	if m.Content != "You said: ping" {
		t.Fatalf("echo %q", m.Content)
	}
}

func TestBadScript(t *testing.T) {
	if _, err := scripted.New(scripted.Config{Replies: []scripted.Reply{{Finish: "done"}}}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("bad finish: %v", err)
	}
	if _, err := scripted.New(scripted.Config{Replies: []scripted.Reply{{ToolCalls: []scripted.Call{{}}}}}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nameless call: %v", err)
	}
}

func TestCancelledStreamStops(t *testing.T) {
	p, _ := scripted.New(scripted.Config{Replies: []scripted.Reply{{Text: "a b c"}}})
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	s, _ := p.Stream(ctx, llm.Request{})
	cancel()
	if _, err := s.Recv(); !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("recv after cancel: %v", err)
	}
}

func fmtSlice(xs []string) string {
	out := "["
	for i, x := range xs {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}

func TestSimulatedUsageCountsTheSharedPrefixAsCacheHits(t *testing.T) {
	p, err := scripted.New(scripted.Config{SimulateUsage: true, ContextWindow: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if p.ContextWindow("") != 1000 {
		t.Fatalf("window %d", p.ContextWindow(""))
	}
	usage := func(req llm.Request) llm.Usage {
		s, err := p.Stream(stdctx.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var a llm.Assembler
		for {
			c, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			a.Add(c)
		}
		return a.Usage()
	}
	h := llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "a question of some length"})
	req := llm.Request{AgentID: "a", System: "sys", History: h}
	first := usage(req)
	if first.InputTokens == 0 || first.CacheHitTokens != 0 || first.OutputTokens == 0 {
		t.Fatalf("first request: %+v", first)
	}
	req.History = h.Append(llm.Message{Role: llm.RoleAssistant, Content: "an answer"}, llm.Message{Role: llm.RoleUser, Content: "more"})
	second := usage(req)
	if second.CacheHitTokens != first.InputTokens || second.CacheMissTokens != second.InputTokens-second.CacheHitTokens {
		t.Fatalf("second request %+v should hit the %d tokens of the first", second, first.InputTokens)
	}
	req.History = llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "something else"})
	if third := usage(req); third.CacheHitTokens >= second.InputTokens {
		t.Fatalf("a changed history still hit the cache: %+v", third)
	}
	if d, _ := scripted.New(scripted.Config{}); d.ContextWindow("") != scripted.DefaultContextWindow {
		t.Fatal("no default window")
	}
	if _, err := scripted.New(scripted.Config{ContextWindow: -1}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("a negative window: %v", err)
	}
}

// TestEchoesPartsAndRefusesUnresolved: the echo says what each attachment
// brought (so end-to-end tests see the bytes reached the model), and an
// image without its bytes is refused before answering, as by a real
// provider.
func TestEchoesPartsAndRefusesUnresolved(t *testing.T) {
	p, err := scripted.New(scripted.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := parts.Of(p, ""); !c.Images || !c.Documents {
		t.Fatalf("capabilities %+v", c)
	}
	img := llm.Part{Type: llm.PartImage, MediaType: "image/png", Ref: "sha256:aa", Data: []byte("\x89PNG1234")}
	msg := llm.Message{Role: llm.RoleUser, Content: "look", Parts: []llm.Part{{Type: llm.PartText, Text: "look"}, img}}
	if m := collect(t, p, llm.Request{History: llm.NewHistory(msg)}); m.Content != "You said: look [image image/png, 8 bytes]" {
		t.Fatalf("echo %q", m.Content)
	}
	msg.Parts[1].Data = nil
	if _, err := p.Stream(stdctx.Background(), llm.Request{History: llm.NewHistory(msg)}); !errs.HasCode(err, parts.Unresolved) {
		t.Fatalf("an image without bytes: %v", err)
	}
}
