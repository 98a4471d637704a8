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
