// Command oddplugin is a plugin binary that dsh cannot mount: it listens
// to an event plugin binaries cannot hear. dsh plugins check must say so.
package main

import (
	"context"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

func main() {
	p := sdk.New("odd", "0.0.1")
	p.Waterfall("no/such-event", func(ctx context.Context, call sdk.Call, next sdk.Next) (*pluginv1.Result, error) {
		return next(ctx, nil)
	})
	p.Serve()
}
