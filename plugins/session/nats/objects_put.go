package nats

import (
	stdctx "context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// putChunk is the size of one chunk of a blob, the object store's own
// default.
const putChunk = 128 << 10

// put writes data as object name of the object store, in the layout the
// object store's Get reads (ADR-20): the chunks on $O.<bucket>.C.<id>,
// then the object's entry, a roll-up of $O.<bucket>.M.<name, base64url>.
//
// ObjectStore.Put does the same with asynchronous publishes, and leaks a
// goroutine when its publisher is cleaned up before that goroutine first
// runs (nats.go v1.55, jetstream/object.go: cleanupReplySub sets the
// status channel it waits on to nil): one per few dozen puts on a
// long-running host. Publishing each chunk and waiting for its ack costs a
// round trip per 128 KB, a few milliseconds for the largest part allowed.
func (o *objects) put(ctx stdctx.Context, name string, data []byte) error {
	var id [16]byte
	rand.Read(id[:])
	bucket := ObjectBucket(o.cfg.Stream)
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: putChunk}},
		Bucket:     bucket,
		NUID:       hex.EncodeToString(id[:]),
		Size:       uint64(len(data)),
	}
	chunks := fmt.Sprintf("$O.%s.C.%s", bucket, info.NUID)
	sum := sha256.New()
	for off := 0; off < len(data); off += putChunk {
		part := data[off:min(off+putChunk, len(data))]
		sum.Write(part)
		if _, err := o.js.Publish(ctx, chunks, part); err != nil {
			o.purge(chunks)
			return err
		}
		info.Chunks++
	}
	info.Digest = jetstream.GetObjectDigestValue(sum)
	m := natsgo.NewMsg(fmt.Sprintf("$O.%s.M.%s", bucket, base64.URLEncoding.EncodeToString([]byte(name))))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	var err error
	if m.Data, err = json.Marshal(info); err == nil {
		_, err = o.js.PublishMsg(ctx, m)
	}
	if err != nil {
		o.purge(chunks)
	}
	return err
}

// purge removes the chunks of a put that failed; what it cannot remove
// stays unnamed in the stream.
func (o *objects) purge(chunks string) {
	ctx, cancel := o.ctx()
	defer cancel()
	if st, err := o.js.Stream(ctx, "OBJ_"+ObjectBucket(o.cfg.Stream)); err == nil {
		st.Purge(ctx, jetstream.WithPurgeSubject(chunks))
	}
}
