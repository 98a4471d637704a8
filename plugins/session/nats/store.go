package nats

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Unreachable: the NATS server cannot be reached, or JetStream refused to
// set up or serve the session store.
const Unreachable errs.Code = "SESSION_NATS_UNREACHABLE"

// agentHeader names, on every message, the agent that wrote it: a listing
// reads it from the first message of a log.
const agentHeader = "Dsh-Agent"

// tenantHeader names, on every message of a tenant's session, the tenant
// it belongs to, so any host that reads the log or rebuilds the index
// knows it.
const tenantHeader = "Dsh-Tenant"

// author is who a log's messages are written for: the agent, and the
// session's tenant (empty for an operator's session).
type author struct{ agent, tenant string }

// OpenHeader marks the first message of a session's log, its open record:
// it holds no event, and makes the session exist in the stream from its
// open, so that another host can resume a session that was opened and
// never prompted. Readers of the stream skip it (IsOpenRecord).
const OpenHeader = "Dsh-Open"

// IsOpenRecord reports whether a message with header h is a session's
// open record rather than an event.
func IsOpenRecord(h natsgo.Header) bool { return h.Get(OpenHeader) != "" }

// store is the plugin's state: the connection, the stream of logs, the
// lease bucket and the writers of the sessions it holds.
type store struct {
	cfg    Config
	log    hclog.Logger
	nc     *natsgo.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	leader LeaderReader // reads that must see every acked append
	leases jetstream.KeyValue
	index  jetstream.KeyValue // see index.go
	cat    *catalog           // see pages.go
	// ends are the log ends read by lock, for the load that follows it.
	ends sync.Map
	// listing is the List in flight, which concurrent ones join.
	listing listings
	holder  string // who this process is, as a lease names it

	// atomic: the stream takes atomic batches (batch.go); batches
	// numbers them.
	atomic  atomic.Bool
	batches atomic.Uint64

	// writers are the sessions this process holds, and those it adopted
	// (opened without its lease; they lock on first use).
	writers session.Writers[*writer]
}

var (
	_ session.Locker       = (*store)(nil)
	_ session.StoredLocker = (*store)(nil)
	_ session.Lister       = (*store)(nil)
	_ session.Deleter      = (*store)(nil)
	_ session.PageLister   = (*store)(nil)
)

// connect reaches the server and makes sure the stream and the lease
// bucket exist with this config.
func connect(log hclog.Logger, cfg Config) (*store, error) {
	opts := []natsgo.Option{natsgo.Name("dsh session.nats"), natsgo.Timeout(cfg.ConnectTimeout)}
	if cfg.CredentialsFile != "" {
		opts = append(opts, natsgo.UserCredentials(cfg.CredentialsFile))
	}
	nc, err := natsgo.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot connect to the NATS server at %s; start it (nats-server -js) or fix url/credentials_file in the plugin's config", cfg.URL))
	}
	s := &store{cfg: cfg, log: log, nc: nc, holder: holderName(cfg.HostID), leader: NewLeaderReader(nc, cfg.Stream)}
	if err := s.setUp(); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) setUp() error {
	var err error
	if s.js, err = jetstream.New(s.nc); err != nil {
		return errs.Wrap(Unreachable, err, "session.nats: cannot use JetStream on "+s.cfg.URL)
	}
	ctx, t := stdctx.Background(), s.cfg.ConnectTimeout
	// Hosts started together create the same stream and buckets at once:
	// each is created or bound, and retried (Ensure).
	s.stream, err = Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.Stream, error) {
		return BindOrCreateStream(ctx, s.js, s.streamConfig())
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot create or update the stream %q on %s within %s; is JetStream enabled on the server (nats-server -js), are replicas (%d) at most its cluster's size, and does the stream's config conflict with another one?", s.cfg.Stream, s.cfg.URL, SetUpPatience, s.cfg.Replicas))
	}
	// A server before 2.12 drops the setting it does not know. On one
	// replica the server stages each atomic batch in a file store of its
	// own, made and synced per batch, which costs more than the round
	// trips it saves (BENCHMARKS.md); there, events go one at a time.
	have := s.stream.CachedInfo().Config
	s.atomic.Store(have.AllowAtomicPublish && have.Replicas > 1)
	s.leases, err = Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		return BindOrCreateKV(ctx, s.js, s.leaseConfig())
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot create or update the lease bucket %q on %s", LeaseBucket(s.cfg.Stream), s.cfg.URL))
	}
	// Who holds a session is read from the bucket's leader, never from a
	// replica that may be behind (reads.go).
	s.leases = LeaderKV(s.leases, s.nc)
	if _, err = Ensure(ctx, t, func(ctx stdctx.Context) (struct{}, error) { return struct{}{}, s.openIndex(ctx) }); err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot open or build the session index %q on %s", IndexBucket(s.cfg.Stream), s.cfg.URL))
	}
	if _, err = Ensure(ctx, t, func(ctx stdctx.Context) (struct{}, error) { return struct{}{}, s.openCatalog(ctx) }); err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot open or build the session catalog %q on %s", CatalogStream(s.cfg.Stream), s.cfg.URL))
	}
	return nil
}

func (s *store) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "dsh session logs, one subject per session",
		Subjects:    []string{s.cfg.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		// Logs are read by direct gets, a whole log per request, from any
		// replica; where a log ends is still read from the leader, as a
		// replica may not have applied the last acked append (reads.go).
		AllowDirect: true,
		// A checkpoint's events are one atomic batch (batch.go). Asked
		// of a server that has them only: an older one drops the setting,
		// and asking again would update the stream at every start.
		AllowAtomicPublish: serverAtLeast(s.nc.ConnectedServerVersion(), 2, 12),
	}
}

// serverAtLeast reports whether a nats-server version ("2.12.1",
// "2.14.0-beta.1") is major.minor or later; an unreadable one is not.
func serverAtLeast(version string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func (s *store) leaseConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      LeaseBucket(s.cfg.Stream),
		Description: "dsh session leases: who writes each session",
		TTL:         s.cfg.LeaseTTL,
		// An expired lease leaves a marker, so a cluster's hosts see a
		// host die (cluster/adopt.go) apart from a release.
		LimitMarkerTTL: s.cfg.LeaseTTL,
		Replicas:       s.cfg.Replicas,
		Storage:        jetstream.FileStorage,
	}
}

func (s *store) timeout(ctx stdctx.Context) (stdctx.Context, stdctx.CancelFunc) {
	return stdctx.WithTimeout(ctx, s.cfg.ConnectTimeout)
}

func (s *store) subject(sessionID string) (string, error) {
	if !session.ValidID(sessionID) {
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf(
			"session.nats: session id %q cannot name a subject; use letters, digits, '.', '_' and '-', starting with a letter or digit", sessionID))
	}
	return Subject(s.cfg.SubjectPrefix, sessionID), nil
}

// Subject is the subject of session sessionID's log under prefix; the id
// should be valid (session.ValidID). Exported so that readers of the
// stream, like a cluster's followers, name the log as its writer does.
func Subject(prefix, sessionID string) string {
	// A '.' separates subject tokens; the id's dots stay in one token.
	return prefix + "." + strings.ReplaceAll(sessionID, ".", "%2E")
}

// lastSeq is the stream sequence of the last message on subject, 0 when
// there is none.
func (s *store) lastSeq(ctx stdctx.Context, subject string) (uint64, error) {
	m, err := s.leader.Last(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, s.failed(err, "read the end of "+subject)
	}
	return m.Sequence, nil
}

func (s *store) failed(err error, what string) error {
	return errs.Wrap(Unreachable, err, fmt.Sprintf("session.nats: cannot %s in stream %q on %s; check that the server is up and JetStream is enabled", what, s.cfg.Stream, s.cfg.URL))
}

// Load reads a session's log back in order. Messages are whole or absent,
// so there is no cut line to repair; a log that ends inside a turn is
// closed by the session log on resume.
func (s *store) Load(ctx stdctx.Context, sessionID string) ([]session.Event, error) {
	l, err := s.readLog(ctx, sessionID)
	return l.events, err
}

// storedLog is a session's log as read from the stream.
type storedLog struct {
	events []session.Event
	agent  string // named by the first event's message
	tenant string // named by the first message that names one
	// born and last are the stream sequences of its first and last
	// messages; msgs counts them, the open record included.
	born, last, msgs uint64
}

// readBatch is how many messages one pull of a log asks for.
const readBatch = 512

// readerIdle is how long the server keeps a log's reader after its last
// pull.
const readerIdle = 5 * time.Second

// readLog reads session id's log whole. Its end is asked of the stream's
// leader first (unless the lock just read it); the messages then come in
// batches of direct gets (reads.go), usually two, until that end.
func (s *store) readLog(ctx stdctx.Context, sessionID string) (storedLog, error) {
	var l storedLog
	subject, err := s.subject(sessionID)
	if err != nil {
		return l, err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	var last uint64
	if end, ok := s.ends.LoadAndDelete(sessionID); ok && s.writers.Holds(sessionID) {
		last = end.(uint64)
	} else if last, err = s.lastSeq(ctx, subject); err != nil {
		return l, err
	}
	if last == 0 {
		return l, s.notFound(sessionID)
	}
	// The first two messages come with their headers: where the log
	// starts, whether with an open record, and the agent that wrote it.
	// The rest come without, which halves what a read costs the server and
	// this host; the answer's end says where it stopped. Both start from
	// the stream's first sequence, from which the server counts a batch
	// from its subject index; from the middle of a log it reads blocks.
	rest := false
	for l.last < last {
		got := l.msgs
		var end uint64
		var err error
		if l.msgs == 0 {
			_, err = s.directBatch(ctx, subject, 1, 2, false, func(seq uint64, h natsgo.Header, data []byte) error {
				if seq > last {
					return nil // appended after the end asked for
				}
				return l.add(h, data, seq, subject, sessionID)
			})
		} else {
			from, skip := uint64(1), l.msgs
			if rest {
				// A replica behind the leader, or a capped answer: the
				// rest from where it stopped.
				from, skip = l.last+1, 0
			}
			end, err = s.directBatch(ctx, subject, from, readBatch, true, func(_ uint64, _ natsgo.Header, data []byte) error {
				if skip > 0 {
					skip-- // read with its headers already
					return nil
				}
				return l.take(nil, data, fmt.Sprintf("message %d of the log", l.msgs+1), subject, sessionID)
			})
			if err == nil && l.msgs > got {
				// Read without their sequences: the answer ends at end. It
				// may hold messages appended after last; they are the log
				// as of end, which is as consistent.
				l.last, rest = end, true
			}
		}
		if errors.Is(err, errNoDirect) {
			return s.readLogByConsumer(ctx, sessionID, subject, last)
		}
		if err != nil {
			if errs.HasCode(err, session.BadLog) {
				return l, err
			}
			return l, s.failed(err, fmt.Sprintf("read session %q", sessionID))
		}
		if l.msgs == got && l.last < last {
			// The replica that answered is behind the leader: ask again.
			select {
			case <-ctx.Done():
				return l, s.failed(ctx.Err(), fmt.Sprintf("read session %q up to message %d", sessionID, last))
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return l, nil
}

// readLogByConsumer reads the log through an ephemeral consumer, for a
// stream that does not allow direct gets.
func (s *store) readLogByConsumer(ctx stdctx.Context, sessionID, subject string, last uint64) (storedLog, error) {
	var l storedLog
	// An ephemeral pull consumer of the log's subject, kept in memory on
	// one server.
	cons, err := s.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject:     subject,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: readerIdle,
	})
	if err != nil {
		return l, s.failed(err, fmt.Sprintf("read session %q", sessionID))
	}
	defer func() {
		// Not left to linger until it idles out; one that could not be
		// deleted does, and goes then.
		dctx, cancel := s.timeout(stdctx.WithoutCancel(ctx))
		s.stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
		cancel()
	}()
	for l.last < last {
		// What the consumer's server holds now: a replica behind the
		// leader gives the rest on a later pull.
		got := l.msgs
		batch, err := cons.FetchNoWait(readBatch)
		if err == nil {
			for m := range batch.Messages() {
				meta, merr := m.Metadata()
				if merr != nil {
					return l, s.failed(merr, fmt.Sprintf("read session %q", sessionID))
				}
				if aerr := l.add(m.Headers(), m.Data(), meta.Sequence.Stream, subject, sessionID); aerr != nil {
					return l, aerr
				}
			}
			err = batch.Error()
		}
		// A consumer just created may not be known yet on every server of
		// a cluster: its pulls find no responder for a moment.
		if err != nil && !errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, natsgo.ErrNoResponders) {
			return l, s.failed(err, fmt.Sprintf("read session %q", sessionID))
		}
		if l.msgs == got && l.last < last {
			select {
			case <-ctx.Done():
				return l, s.failed(ctx.Err(), fmt.Sprintf("read session %q up to message %d", sessionID, last))
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return l, nil
}

// add takes in the message at stream sequence seq of the log of session
// id on subject.
func (l *storedLog) add(h natsgo.Header, data []byte, seq uint64, subject, id string) error {
	if seq <= l.last {
		return nil // redelivered by the ordered consumer's reset
	}
	if l.msgs == 0 {
		l.born = seq
	}
	l.last = seq
	return l.take(h, data, fmt.Sprintf("message %d", seq), subject, id)
}

// take counts one message of the log, named what in errors, and keeps its
// event. A message read without its headers (h nil) is an event: only a
// log's first message is an open record, and it is read with them.
func (l *storedLog) take(h natsgo.Header, data []byte, what, subject, id string) error {
	l.msgs++
	if IsOpenRecord(h) {
		return nil
	}
	var e session.Event
	jerr := json.Unmarshal(data, &e)
	if jerr == nil && e.Seq == 0 {
		jerr = errors.New("it has no seq")
	}
	if jerr != nil {
		return errs.New(session.BadLog, fmt.Sprintf("session.nats: %s of %s is not a session event: %v; purge the session with `dsh sessions delete %s`", what, subject, jerr, id))
	}
	if !e.Type.Known() {
		return errs.New(session.BadLog, fmt.Sprintf(
			"session.nats: %s of %s has the unknown event type %q; it was written by another version of dsh, and skipping it could drop a message", what, subject, e.Type))
	}
	if want := int64(len(l.events)) + 1; e.Seq != want {
		return errs.New(session.BadLog, fmt.Sprintf(
			"session.nats: %s of %s is event %d where %d was expected; the log lost or repeats events", what, subject, e.Seq, want))
	}
	if len(l.events) == 0 {
		l.agent = h.Get(agentHeader)
	}
	if l.tenant == "" {
		if t, err := url.QueryUnescape(h.Get(tenantHeader)); err == nil {
			l.tenant = t
		}
	}
	l.events = append(l.events, e)
	return nil
}

func (s *store) notFound(sessionID string) error {
	return errs.New(session.NotFound, fmt.Sprintf("session.nats: no session %q in stream %q on %s; `dsh sessions list` shows the stored ones", sessionID, s.cfg.Stream, s.cfg.URL))
}

// close publishes every pending event, releases every lease and closes the
// connection; it runs when the plugin goes away.
func (s *store) close() error {
	var failed []error
	for _, wr := range s.writers.All() {
		if err := wr.write(stdctx.Background(), 1<<62); err != nil && !errs.HasCode(err, session.SessionLocked) {
			failed = append(failed, err)
		}
		wr.Release()
	}
	s.listing.idle.Wait()
	s.nc.Close()
	return errors.Join(failed...)
}
