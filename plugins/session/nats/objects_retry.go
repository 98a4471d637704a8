package nats

import (
	stdctx "context"
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// electing runs op again while its stream has no leader to answer. A
// replicated stream is without one for a moment after it is created and
// whenever its leader moves (a server restarts, a host is slow to
// heartbeat); the request then meets no responder, which says that
// nothing was applied, so trying again is safe. It gives up when ctx
// ends and returns op's last error.
func electing(ctx stdctx.Context, op func(stdctx.Context) error) error {
	wait := 20 * time.Millisecond
	for {
		err := op(ctx)
		if !errors.Is(err, natsgo.ErrNoResponders) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}
