package llm_test

import (
	stdctx "context"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

func TestAssemblerJoinsFragmentsByIndex(t *testing.T) {
	var a llm.Assembler
	for _, c := range []llm.Chunk{
		{Kind: llm.ChunkReasoning, Text: "think "},
		{Kind: llm.ChunkReasoning, Text: "hard", Signature: "sig"},
		{Kind: llm.ChunkText, Text: "Hello, "},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 1, ID: "b", Name: "second"}},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 0, ID: "a", Name: "first"}},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: `{"x":`}},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 1, Arguments: `{}`}},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: `1}`}},
		{Kind: llm.ChunkText, Text: "world"},
		{Kind: llm.ChunkUsage, Usage: &llm.Usage{InputTokens: 10, CacheHitTokens: 8, CacheMissTokens: 2, OutputTokens: 5}},
		{Kind: llm.ChunkFinish, Finish: llm.FinishToolCalls},
	} {
		a.Add(c)
	}
	m := a.Message()
	if m.Content != "Hello, world" || m.Reasoning != "think hard" || m.ReasoningSignature != "sig" || m.Role != llm.RoleAssistant {
		t.Fatalf("message %+v", m)
	}
	if len(m.ToolCalls) != 2 || m.ToolCalls[0] != (llm.ToolCall{ID: "a", Name: "first", Arguments: `{"x":1}`}) || m.ToolCalls[1].Name != "second" {
		t.Fatalf("tool calls %+v", m.ToolCalls)
	}
	if u := a.Usage(); u.CacheHitTokens != 8 || u.InputTokens != 10 {
		t.Fatalf("usage %+v", u)
	}
	if f, _ := a.Finish(); f != llm.FinishToolCalls {
		t.Fatalf("finish %q", f)
	}
}

func TestHistoryViewsNeverChange(t *testing.T) {
	var log llm.Log
	log.Append(llm.Message{Role: llm.RoleUser, Content: "1"})
	v1 := log.View()
	v2 := v1.Append(llm.Message{Role: llm.RoleUser, Content: "branch"})
	log.Append(llm.Message{Role: llm.RoleUser, Content: "2"})
	if v1.Len() != 1 || v2.Len() != 2 || v2.At(1).Content != "branch" || log.View().At(1).Content != "2" {
		t.Fatalf("views interfered: v1=%v v2=%v log=%v", v1.Messages(), v2.Messages(), log.View().Messages())
	}
	if s := log.View().Slice(1, 2); s.Len() != 1 || s.At(0).Content != "2" {
		t.Fatal("slice")
	}
	if _, ok := (llm.History{}).Last(); ok {
		t.Fatal("empty history has no last")
	}
}

func TestUnknownProviderNamesTheRegisteredOnes(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	svc := llm.NewService()
	p, _ := root.Plugin(dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		return svc.Register(ctx, "alpha", nopProvider{})
	}), nil)
	_, err := svc.Stream(stdctx.Background(), llm.Request{AgentID: "main", Provider: "beta"})
	if !errs.HasCode(err, llm.ProviderUnknown) || !strings.Contains(err.Error(), `"beta"`) || !strings.Contains(err.Error(), "alpha") {
		t.Fatalf("unknown provider: %v", err)
	}
	if err := svc.Register(root, "alpha", nopProvider{}); !errs.HasCode(err, errs.ServiceConflict) {
		t.Fatalf("duplicate provider: %v", err)
	}
	p.Dispose(stdctx.Background())
	if len(svc.Names()) != 0 {
		t.Fatal("provider outlived its fiber")
	}
}

type nopProvider struct{}

func (nopProvider) Stream(stdctx.Context, llm.Request) (llm.Stream, error) { return nil, nil }
