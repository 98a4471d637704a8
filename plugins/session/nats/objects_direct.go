package nats

import (
	stdctx "context"

	"github.com/nats-io/nats.go/jetstream"
)

// leaderReads turns off direct gets on stream, which the object store and
// key-value buckets turn on when they create their streams. A direct get
// may be answered by a replica that has not applied the last acked write
// yet: a host would then not find a blob another host has just stored
// (and write it again, leaving the first copy's chunks behind), or read a
// reference marker that was removed as still there. Reads go to the
// stream's leader instead, as the session logs' do. Bind the bucket again
// afterwards: a handle keeps the setting it was bound with.
func leaderReads(ctx stdctx.Context, js jetstream.JetStream, stream string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cfg := st.CachedInfo().Config
	if !cfg.AllowDirect {
		return nil
	}
	cfg.AllowDirect = false
	_, err = js.UpdateStream(ctx, cfg)
	return err
}
