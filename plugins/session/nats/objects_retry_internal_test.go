package nats

import (
	stdctx "context"
	"errors"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// A request that met no leader is tried again until one answers; any
// other error, or the end of the deadline, ends the tries.
func TestElectingRetriesOnlyWhileNoLeaderAnswers(t *testing.T) {
	calls := 0
	err := electing(t.Context(), func(stdctx.Context) error {
		calls++
		if calls < 3 {
			return natsgo.ErrNoResponders
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("electing returned %v after %d calls; want nil after 3", err, calls)
	}

	other := errors.New("refused")
	calls = 0
	if err := electing(t.Context(), func(stdctx.Context) error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("another error: %v after %d calls; want it at once", err, calls)
	}

	ctx, cancel := stdctx.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = electing(ctx, func(stdctx.Context) error { return natsgo.ErrNoResponders })
	if !errors.Is(err, natsgo.ErrNoResponders) || time.Since(start) > 2*time.Second {
		t.Fatalf("no leader until the deadline: %v after %v; want no responders at the deadline", err, time.Since(start))
	}
}
