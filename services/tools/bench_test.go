package tools_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// BenchmarkExecute is the cost of the pipeline around a tool that does
// nothing: lookup, validation, tools/approve and tools/execute with no
// listeners. "schema" against "no-schema" is the cost of validation.
func BenchmarkExecute(b *testing.B) {
	for _, c := range []struct{ name, schema string }{
		{"no-schema", ""},
		{"schema", `{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			root := newRoot(b)
			s := tools.New()
			err := s.Register(root, tools.Tool{Name: "read", Parameters: []byte(c.schema), Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
				return tools.Result{}, nil
			}})
			if err != nil {
				b.Fatal(err)
			}
			call := tools.Call{Name: "read", Arguments: []byte(`{"path":"src/main.go","offset":10,"limit":200}`)}
			ctx := stdctx.Background()
			b.ReportAllocs()
			for b.Loop() {
				if r, err := s.Execute(ctx, root, call); err != nil || r.IsError {
					b.Fatal(r, err)
				}
			}
		})
	}
}
