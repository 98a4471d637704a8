package nats

import (
	stdctx "context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Whatever a session references lives where its log does: with the logs
// in JetStream, the attachments are too, so a session that moves to
// another host finds its images there. The objects backend keeps
//
//	blobs    the object store <stream>_ATTACHMENTS, one object per blob,
//	         named by its sha256 hex digest;
//	markers  the key-value bucket <stream>_ATTACHMENT_REFS, one key
//	         <hex>.<session id, base64url> per referencing session, its
//	         value "ok" once the session's log was seen to hold the ref;
//	lock     the key-value bucket <stream>_ATTACHMENT_LOCK (see
//	         objects_lock.go), which serialises marker and blob changes
//	         across hosts as the disk store's flock does across processes.
//
// Every part is replicated as the session stream is (replicas).

// ObjectBucket is the object store of the attachments of stream's sessions.
func ObjectBucket(stream string) string { return stream + "_ATTACHMENTS" }

// RefsBucket is the key-value bucket of the attachments' reference markers.
func RefsBucket(stream string) string { return stream + "_ATTACHMENT_REFS" }

// refMarkerTTL is how long the marker of a removed reference stays in the
// refs bucket: long enough for a watcher that lists the bucket meanwhile
// to see it gone, short enough that removed references cost nothing.
const refMarkerTTL = time.Minute

// verified is the value of a marker its session's log was seen to back;
// a new marker holds unverified.
var (
	verified   = []byte("ok")
	unverified = []byte("-")
)

// objects is an attachments.Backend over JetStream.
type objects struct {
	cfg    Config
	nc     *natsgo.Conn
	js     jetstream.JetStream
	obj    jetstream.ObjectStore
	refs   jetstream.KeyValue
	lock   *clusterLock
	holder string
}

var (
	_ attachments.Backend   = (*objects)(nil)
	_ attachments.RefLister = (*objects)(nil)
)

// AttachmentsBackend opens the JetStream backend of the attachments of the
// sessions this config keeps: the host mounts its store there rather than
// on disk, so every host sharing the stream shares the attachments. Close
// the store (attachments.Store.Close) to close its connection.
func (c Config) AttachmentsBackend() (attachments.Backend, error) {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = Config{}.Defaults().ConnectTimeout
	}
	if c.LeaseTTL < time.Second {
		c.LeaseTTL = Config{}.Defaults().LeaseTTL
	}
	opts := []natsgo.Option{natsgo.Name("dsh attachments"), natsgo.Timeout(c.ConnectTimeout)}
	if c.CredentialsFile != "" {
		opts = append(opts, natsgo.UserCredentials(c.CredentialsFile))
	}
	nc, err := natsgo.Connect(c.URL, opts...)
	if err != nil {
		return nil, errs.Wrap(attachments.StoreFailed, err, fmt.Sprintf(
			"attachments: cannot connect to the NATS server at %s for the attachments store; start it (nats-server -js) or fix session.nats's url/credentials_file", c.URL))
	}
	o := &objects{cfg: c, nc: nc, holder: holderName(c.HostID)}
	if err := o.setUp(); err != nil {
		nc.Close()
		return nil, err
	}
	return o, nil
}

func (o *objects) setUp() error {
	js, err := jetstream.New(o.nc)
	if err != nil {
		return o.failed(err, "use JetStream")
	}
	o.js = js
	ctx, t := stdctx.Background(), o.cfg.ConnectTimeout
	replicas := max(o.cfg.Replicas, 1)
	// Hosts started together create the same buckets at once: each is
	// created or bound, and retried (Ensure).
	o.obj, err = Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.ObjectStore, error) {
		// Create, never update: an update writes the object store's own
		// settings back, direct gets included, and a host that bound the
		// bucket in that moment would keep asking for direct gets that no
		// server answers once another host turned them off again.
		_, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      ObjectBucket(o.cfg.Stream),
			Description: "dsh attachments: the bytes of message parts, by sha256",
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		})
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, err
		}
		if err := leaderReads(ctx, js, "OBJ_"+ObjectBucket(o.cfg.Stream)); err != nil {
			return nil, err
		}
		return js.ObjectStore(ctx, ObjectBucket(o.cfg.Stream))
	})
	if err != nil {
		return o.setUpFailed(err, "object store", ObjectBucket(o.cfg.Stream))
	}
	o.refs, err = Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		if _, err := BindOrCreateKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:      RefsBucket(o.cfg.Stream),
			Description: "dsh attachments: which sessions reference each blob",
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
			// Removed markers are purged with a TTL, so they do not pile up.
			LimitMarkerTTL: refMarkerTTL,
		}); err != nil {
			return nil, err
		}
		if err := leaderReads(ctx, js, "KV_"+RefsBucket(o.cfg.Stream)); err != nil {
			return nil, err
		}
		return js.KeyValue(ctx, RefsBucket(o.cfg.Stream))
	})
	if err != nil {
		return o.setUpFailed(err, "key-value bucket", RefsBucket(o.cfg.Stream))
	}
	if o.lock, err = openLock(ctx, js, o.cfg, o.holder); err != nil {
		return o.setUpFailed(err, "key-value bucket", LockBucket(o.cfg.Stream))
	}
	return nil
}

func (o *objects) setUpFailed(err error, what, name string) error {
	return errs.Wrap(attachments.StoreFailed, err, fmt.Sprintf(
		"attachments: cannot create or bind the %s %q on %s within %s; is JetStream enabled on the server (nats-server -js), and are replicas (%d) at most its cluster's size?",
		what, name, o.cfg.URL, SetUpPatience, max(o.cfg.Replicas, 1)))
}

func (o *objects) failed(err error, what string) error {
	return errs.Wrap(attachments.StoreFailed, err, fmt.Sprintf(
		"attachments: cannot %s in the JetStream attachments store of stream %q on %s; check that the NATS servers are reachable", what, o.cfg.Stream, o.cfg.URL)).WithReason(attachments.ReasonUnreachable)
}

func (o *objects) notFound(hex string) error {
	return errs.New(attachments.NotFound, fmt.Sprintf(
		"attachment sha256:%s is not in the object store %s on %s; it was released — the message that names it cannot be sent with it", hex, ObjectBucket(o.cfg.Stream), o.cfg.URL))
}

// ctx bounds one request as connect_timeout says.
func (o *objects) ctx() (stdctx.Context, stdctx.CancelFunc) {
	return stdctx.WithTimeout(stdctx.Background(), o.cfg.ConnectTimeout)
}

func (o *objects) Lock() (func(), error) { return o.lock.acquire() }

func (o *objects) WriteBlob(hex string, data []byte) (int64, error) {
	switch err := o.HasBlob(hex); {
	case err == nil:
		return 0, nil
	case !errs.HasCode(err, attachments.NotFound):
		return 0, err
	}
	// A blob of the limit's size takes longer than one request: the
	// timeout grows with it, at a pessimistic 1 MB/s.
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), o.cfg.ConnectTimeout+time.Duration(len(data)>>20)*time.Second)
	defer cancel()
	if err := electing(ctx, func(ctx stdctx.Context) error { return o.put(ctx, hex, data) }); err != nil {
		return 0, o.failed(err, "write blob sha256:"+hex)
	}
	return int64(len(data)), nil
}

func (o *objects) Usage() (int64, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	var st jetstream.ObjectStoreStatus
	err := electing(ctx, func(ctx stdctx.Context) (err error) {
		st, err = o.obj.Status(ctx)
		return err
	})
	if err != nil {
		return 0, o.failed(err, "read the size of the blobs")
	}
	return int64(min(st.Size(), math.MaxInt64)), nil
}

func (o *objects) ReadBlob(hex string) ([]byte, error) {
	// The size is not known before the read: room for the largest part
	// at a pessimistic 1 MB/s.
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), max(o.cfg.ConnectTimeout, 30*time.Second))
	defer cancel()
	var b []byte
	err := electing(ctx, func(ctx stdctx.Context) (err error) {
		b, err = o.obj.GetBytes(ctx, hex)
		return err
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, o.notFound(hex)
	}
	if err != nil {
		return nil, o.failed(err, "read blob sha256:"+hex)
	}
	return b, nil
}

func (o *objects) HasBlob(hex string) error {
	ctx, cancel := o.ctx()
	defer cancel()
	err := electing(ctx, func(ctx stdctx.Context) error {
		_, err := o.obj.GetInfo(ctx, hex)
		return err
	})
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return o.notFound(hex)
	}
	if err != nil {
		return o.failed(err, "look up blob sha256:"+hex)
	}
	return nil
}

func (o *objects) RemoveBlob(hex string) error {
	ctx, cancel := o.ctx()
	defer cancel()
	err := electing(ctx, func(ctx stdctx.Context) error { return o.obj.Delete(ctx, hex) })
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return o.failed(err, "remove blob sha256:"+hex)
	}
	return nil
}

func (o *objects) Blobs() ([]string, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	var list []*jetstream.ObjectInfo
	err := electing(ctx, func(ctx stdctx.Context) (err error) {
		list, err = o.obj.List(ctx)
		return err
	})
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, o.failed(err, "list the blobs")
	}
	out := make([]string, 0, len(list))
	for _, info := range list {
		if isHex(info.Name) {
			out = append(out, info.Name)
		}
	}
	return out, nil
}

// refKey names session's marker of hex. Session ids may hold characters
// a key cannot ('@', say, for an in-memory agent's session): base64url
// keeps every id one token of the key.
func refKey(hex, session string) string {
	return hex + "." + base64.RawURLEncoding.EncodeToString([]byte(session))
}

func (o *objects) AddRef(hex, session string) (bool, error) {
	ctx, cancel := o.ctx()
	defer cancel()
	err := electing(ctx, func(ctx stdctx.Context) error {
		_, err := o.refs.Create(ctx, refKey(hex, session), unverified)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, o.failed(err, "record a reference")
	}
	return true, nil
}

func (o *objects) RemoveRef(hex, session string) error {
	ctx, cancel := o.ctx()
	defer cancel()
	if err := electing(ctx, func(ctx stdctx.Context) error {
		return o.refs.Purge(ctx, refKey(hex, session), jetstream.PurgeTTL(refMarkerTTL))
	}); err != nil {
		return o.failed(err, "remove a reference")
	}
	return nil
}

// markers returns the live markers whose keys match filter: key → value.
func (o *objects) markers(filter string, metaOnly bool) (map[string][]byte, error) {
	timeout := o.cfg.ConnectTimeout
	if filter == ">" {
		timeout *= 6 // every marker: a bucket may hold many
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), timeout)
	defer cancel()
	opts := []jetstream.WatchOpt{jetstream.IgnoreDeletes()}
	if metaOnly {
		opts = append(opts, jetstream.MetaOnly())
	}
	var w jetstream.KeyWatcher
	err := electing(ctx, func(ctx stdctx.Context) (err error) {
		w, err = o.refs.WatchFiltered(ctx, []string{filter}, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	out := map[string][]byte{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("the watch of the references ended early")
			}
			if e == nil { // the current values are all delivered
				return out, nil
			}
			out[e.Key()] = e.Value()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (o *objects) Refs(hex string) (map[string]bool, error) {
	m, err := o.markers(hex+".*", false)
	if err != nil {
		return nil, o.failed(err, "list the references of sha256:"+hex)
	}
	return byBlob(m)[hex], nil
}

// AllRefs reads every marker in one watch (attachments.RefLister).
func (o *objects) AllRefs() (map[string]map[string]bool, error) {
	m, err := o.markers(">", false)
	if err != nil {
		return nil, o.failed(err, "list the references")
	}
	return byBlob(m), nil
}

// byBlob groups markers (key → value) by blob: hex → session → verified.
func byBlob(markers map[string][]byte) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for k, v := range markers {
		hex, enc, _ := strings.Cut(k, ".")
		session, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil || !isHex(hex) {
			continue // not a marker this store wrote
		}
		if out[hex] == nil {
			out[hex] = map[string]bool{}
		}
		out[hex][string(session)] = string(v) == string(verified)
	}
	return out
}

func (o *objects) SessionBlobs(session string) ([]string, error) {
	m, err := o.markers("*."+base64.RawURLEncoding.EncodeToString([]byte(session)), true)
	if err != nil {
		return nil, o.failed(err, "list the references of session "+session)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		if hex, _, _ := strings.Cut(k, "."); isHex(hex) {
			out = append(out, hex)
		}
	}
	return out, nil
}

func (o *objects) Verify(hex, session string) error {
	ctx, cancel := o.ctx()
	defer cancel()
	if err := electing(ctx, func(ctx stdctx.Context) error {
		_, err := o.refs.Put(ctx, refKey(hex, session), verified)
		return err
	}); err != nil {
		return o.failed(err, "mark a reference verified")
	}
	return nil
}

func (o *objects) Age(hex, session string) time.Duration {
	ctx, cancel := o.ctx()
	defer cancel()
	e, err := o.refs.Get(ctx, refKey(hex, session))
	if err != nil {
		return math.MaxInt64
	}
	return time.Since(e.Created())
}

// Sweep has nothing to do: a put that fails removes its chunks itself,
// and the object's entry is written last, so a reader never sees half a
// blob. (Chunks of a put whose host died midway stay in the bucket's
// stream, unnamed; they count in Usage until the bucket is purged.)
func (o *objects) Sweep() error { return nil }

// Close closes the backend's connection.
func (o *objects) Close() error {
	o.lock.close()
	o.nc.Close()
	return nil
}

// isHex reports whether s names a blob: 64 lower-case hex digits.
func isHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
