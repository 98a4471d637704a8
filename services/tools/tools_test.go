package tools_test

import (
	stdctx "context"
	"errors"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

func echo(text string) func(stdctx.Context, tools.Call) (tools.Result, error) {
	return func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: text}, nil }
}

func TestScopedToolsAndExecutionPipeline(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	s := tools.New()
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	if err := s.Register(root, tools.Tool{Name: "date", Execute: echo("global date"), Parameters: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	s.Register(a, tools.Tool{Name: "date", Execute: echo("a's date")})
	s.Register(a, tools.Tool{Name: "secret", Execute: echo("a only")})
	if specs := s.Specs(a); len(specs) != 2 || specs[1].Name != "secret" {
		t.Fatalf("a's specs %v", specs)
	}
	if specs := s.Specs(b); len(specs) != 1 {
		t.Fatalf("b's specs %v", specs)
	}
	r, _ := s.Execute(stdctx.Background(), a, tools.Call{Name: "date"})
	if r.Content != "a's date" {
		t.Fatalf("scoped tool must shadow the global one: %q", r.Content)
	}
	r, _ = s.Execute(stdctx.Background(), b, tools.Call{Name: "secret"})
	if !r.IsError {
		t.Fatal("b must not reach a's tool")
	}
	// A permission listener refuses without calling next.
	tools.EventExecute.On(b, func(ctx stdctx.Context, x tools.Execution, next waterfall.Next[tools.Execution, tools.Result]) (tools.Result, error) {
		if x.Call.Name == "date" {
			return tools.Result{Content: "denied", IsError: true}, nil
		}
		return next.Call(ctx, x)
	})
	if r, _ := s.Execute(stdctx.Background(), b, tools.Call{Name: "date"}); r.Content != "denied" {
		t.Fatalf("listener: %q", r.Content)
	}
	if r, _ := s.Execute(stdctx.Background(), a, tools.Call{Name: "date"}); r.Content != "a's date" {
		t.Fatalf("b's listener leaked to a: %q", r.Content)
	}
	a.Dispose(stdctx.Background())
	if specs := s.Specs(a); len(specs) != 1 {
		t.Fatalf("a's tools outlived its scope: %v", specs)
	}
}

func TestToolFailures(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	s := tools.New()
	s.Register(root, tools.Tool{Name: "err", Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{}, errors.New("no disk") }})
	s.Register(root, tools.Tool{Name: "boom", Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { panic("kaboom") }})
	if r, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "err"}); err != nil || !r.IsError || r.Content != "no disk" {
		t.Fatalf("error result: %+v %v", r, err)
	}
	if _, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "boom"}); !errs.HasCode(err, tools.ToolPanicked) {
		t.Fatalf("panic: %v", err)
	}
	if err := s.Register(root, tools.Tool{Name: "err", Execute: echo("")}); !errs.HasCode(err, errs.ServiceConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := s.Register(root, tools.Tool{Name: "x"}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("no execute: %v", err)
	}
	if err := s.Register(root, tools.Tool{Name: "y", Execute: echo(""), Parameters: []byte("{")}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("bad schema: %v", err)
	}
}
