package llm_test

import (
	stdctx "context"
	"io"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// panicky panics where it is told to.
type panicky struct{ in string }

func (p panicky) Stream(stdctx.Context, llm.Request) (llm.Stream, error) {
	if p.in == "Stream" {
		panic("boom in Stream")
	}
	return &panickyStream{in: p.in}, nil
}

type panickyStream struct {
	in   string
	sent bool
}

func (s *panickyStream) Recv() (llm.Chunk, error) {
	if s.in == "Recv" {
		var m map[string]int
		//lint:ignore SA5000 the panic is the point
		m["nil map"]++ // a genuine runtime panic, not only panic(string)
	}
	if s.sent {
		return llm.Chunk{}, io.EOF
	}
	s.sent = true
	return llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}, nil
}

func (s *panickyStream) Close() error {
	if s.in == "Close" {
		panic("boom in Close")
	}
	return nil
}

// TestAPanickingProviderBecomesAnError: a panic in any of the provider's
// calls comes back as LLM_PROVIDER_PANIC naming the provider and the agent,
// and a stream that panicked keeps answering with that error.
func TestAPanickingProviderBecomesAnError(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	svc := llm.NewService()
	for _, in := range []string{"Stream", "Recv", "Close"} {
		t.Run(in, func(t *testing.T) {
			name := "panics-in-" + in
			if err := svc.Register(root, name, panicky{in: in}); err != nil {
				t.Fatal(err)
			}
			check := func(err error) {
				t.Helper()
				if !errs.Has(err, llm.ProviderPanic, llm.PanicReason) || !strings.Contains(err.Error(), `"`+name+`"`) ||
					!strings.Contains(err.Error(), `"main"`) || !strings.Contains(err.Error(), in) {
					t.Fatalf("got %v; want %s/%s naming provider %q, agent \"main\" and %s", err, llm.ProviderPanic, llm.PanicReason, name, in)
				}
			}
			s, err := svc.Stream(stdctx.Background(), llm.Request{AgentID: "main", Provider: name})
			if in == "Stream" {
				check(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			if in == "Recv" {
				check(err)
				_, again := s.Recv()
				check(again)
			} else if err != nil {
				t.Fatal(err)
			}
			err = s.Close()
			if in == "Close" {
				check(err)
			} else if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAProviderReturningNoStreamIsAnError(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	svc := llm.NewService()
	if err := svc.Register(root, "nop", nopProvider{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Stream(stdctx.Background(), llm.Request{AgentID: "main", Provider: "nop"}); !errs.HasCode(err, llm.ProviderFailed) {
		t.Fatalf("got %v, want %s", err, llm.ProviderFailed)
	}
}
