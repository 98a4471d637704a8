package tools_test

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// Arguments that do not match the tool's schema never reach a policy or
// the tool: the model reads which argument is wrong (docs/tools.md,
// "Validation").
func ExampleService_Execute_invalidArguments() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	s := tools.New()
	err := s.Register(root, tools.Tool{
		Name: "edit",
		Parameters: []byte(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string"},
			"limit":{"type":"integer","minimum":1},
			"edits":{"type":"array","items":{"type":"object","required":["old","new"],"properties":{"old":{"type":"string"},"new":{"type":"string"}}}}}}`),
		Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "edited"}, nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := s.Execute(stdctx.Background(), root, tools.Call{Name: "edit",
		Arguments: []byte(`{"path":7,"limit":0,"edits":[{"old":"a"}],"pth":"x"}`)})
	fmt.Println(r.IsError, err)
	fmt.Println(r.Content)
	// Output:
	// true <nil>
	// Invalid arguments for tool "edit"; the call did not run:
	// - "edits[0].new" is required but missing
	// - argument "limit" must be at least 1, not 0
	// - argument "path" must be string, not number
	// - "pth" is not a parameter of this tool; remove it
	// Fix these arguments to match the tool's parameters and call it again.
}
