// Package testtools registers two tools for the tests of entry points
// (webhooks, schedules): "risky", which asks for approval and counts its
// runs, and "block", which waits until the test releases it or its call is
// cancelled. Their plugins are "test.risky" and "test.block"; only test
// binaries import this package, so no dsh build carries them.
package testtools

import (
	stdctx "context"
	"encoding/json"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// Risky counts the runs of the tool "risky".
var Risky atomic.Int32

var block struct {
	mu      sync.Mutex
	started chan struct{}
	release chan struct{}
}

// ResetBlock makes a fresh "block": calls started from now on wait for the
// next ReleaseBlock.
func ResetBlock() {
	block.mu.Lock()
	block.started, block.release = make(chan struct{}, 8), make(chan struct{})
	block.mu.Unlock()
}

// BlockStarted receives once per call of "block" that started waiting.
func BlockStarted() <-chan struct{} {
	block.mu.Lock()
	defer block.mu.Unlock()
	return block.started
}

// ReleaseBlock lets every waiting and later call of "block" return, until
// the next ResetBlock.
func ReleaseBlock() {
	block.mu.Lock()
	close(block.release)
	block.mu.Unlock()
}

type noConfig struct{}

func init() {
	ResetBlock()
	plugin.Register("test.risky", "a tool that needs approval (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "risky", Description: "needs approval", Parameters: json.RawMessage(`{"type":"object"}`), Approval: tools.Ask,
			Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
				Risky.Add(1)
				return tools.Result{Content: "ran"}, nil
			},
		})
	}, tools.Key)
	plugin.Register("test.block", "a tool that waits for the test (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "block", Description: "waits", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
				block.mu.Lock()
				started, release := block.started, block.release
				block.mu.Unlock()
				started <- struct{}{}
				select {
				case <-release:
					return tools.Result{Content: "released"}, nil
				case <-ctx.Done():
					return tools.Result{Content: "cancelled", IsError: true}, nil
				}
			},
		})
	}, tools.Key)
}
