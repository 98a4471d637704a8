//go:build linux

package bash_test

import (
	stdctx "context"
	"encoding/json"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugins/tools/bash"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkTrue is the cost of one `true` through the tool: process start,
// teardown and, under landlock, the re-exec that enters the sandbox.
func BenchmarkTrue(b *testing.B) {
	for _, mode := range []string{bash.ModeOff, bash.ModeLandlock} {
		b.Run(mode, func(b *testing.B) {
			if mode == bash.ModeLandlock && !sandbox.Probe().Available() {
				b.Skip("no Landlock on this kernel")
			}
			root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
			defer root.Dispose(stdctx.Background())
			cfg := bash.Config{}.Defaults()
			cfg.Sandbox.Mode = mode
			for _, p := range []struct {
				p dshctx.Plugin
				c any
			}{{tools.Plugin, nil}, {bash.Plugin, cfg}} {
				f, _ := root.Plugin(p.p, p.c)
				if err := f.Await(stdctx.Background()); err != nil {
					b.Fatal(err)
				}
			}
			svc, _ := tools.Key.Get(root)
			call := tools.Call{Name: "bash", Arguments: json.RawMessage(`{"command":"true"}`), Workspace: b.TempDir()}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := svc.Execute(stdctx.Background(), root, call); err != nil || r.IsError {
					b.Fatal(r, err)
				}
			}
		})
	}
}
