package tools_test

import (
	stdctx "context"
	"fmt"
	"slices"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// A listener written as a named function needs its signature spelled out;
// ExecuteListener and ExecuteNext are those names.
func ExampleExecuteListener() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	s := tools.New()
	s.Register(root, tools.Tool{Name: "rm", Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		return tools.Result{Content: "removed"}, nil
	}})

	denied := []string{"rm"}
	var deny tools.ExecuteListener = func(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
		if slices.Contains(denied, x.Call.Name) {
			return tools.Result{Content: "not permitted", IsError: true}, nil
		}
		return next.Call(ctx, x)
	}
	tools.EventExecute.On(root, deny)

	r, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "rm"})
	fmt.Println(r.Content, r.IsError, err)
	// Output: not permitted true <nil>
}

// A policy plugin listens to tools/approve: it decides, or passes the call
// on with next to the policies after it and finally the tool's default.
// Deny reaches the model with its reason; Ask goes to the agent's answerer.
func ExampleApproveListener() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	s := tools.New()
	s.Register(root, tools.Tool{
		Name:       "write",
		Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
			return tools.Result{Content: "written"}, nil
		},
	})

	var readOnly tools.ApproveListener = func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		if a.Call.Name == "write" {
			return tools.Verdict{Decision: tools.Deny, Reason: "this agent is read-only", Source: "example.policy"}, nil
		}
		return next.Call(ctx, a)
	}
	tools.EventApprove.On(root, readOnly)

	r, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "write", Arguments: []byte(`{"path":"notes.md"}`)})
	fmt.Println(r.IsError, err)
	fmt.Println(r.Content)
	// Output:
	// true <nil>
	// The call to "write" was denied by "example.policy": this agent is read-only. It did not run; do not retry it unchanged.
}
