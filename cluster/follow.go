package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errFollowerClosed ends the follows still running when the Follower
// closes.
var errFollowerClosed = errs.New(FollowerClosed, "cluster: the follower was closed while following a session; open a new one (the host is stopping)")

// Follower reads the logs of sessions from session.nats's stream, so that
// any host can stream any session, whichever host writes it: a client
// behind a load balancer reaches some host and resumes from the last
// sequence number it saw.
//
// It reads only what is durable: an event is in the stream once its
// writer published it at the session/flush checkpoint (the end of a step
// or of a turn), and the stream chunks of a message being generated are
// never in it.
type Follower struct {
	o   Options
	nc  *nats.Conn
	own bool // the connection is the follower's, closed with it
	js  jetstream.JetStream
	// leader reads where a log ends and finds an event in it: the stream
	// allows direct gets, which a replica behind the leader may answer
	// without the last events.
	leader natsplugin.LeaderReader

	mu     sync.Mutex
	stream jetstream.Stream // looked up on first use: the writers create it

	// stop ends every follow at Close; running counts them.
	stop    stdctx.Context
	cancel  stdctx.CancelCauseFunc
	running sync.WaitGroup
	closed  bool
}

// NewFollower connects to o.URL with a connection of its own, closed by
// Close. Only URL, CredentialsFile, Stream, SubjectPrefix and
// ConnectTimeout are read.
func NewFollower(o Options) (*Follower, error) {
	o = followDefaults(o)
	nc, err := dial(o, "dsh cluster follower", "to follow sessions")
	if err != nil {
		return nil, err
	}
	f, err := NewFollowerOn(nc, o)
	if err != nil {
		nc.Close()
		return nil, err
	}
	f.own = true
	return f, nil
}

// NewFollowerOn follows on a connection the caller owns: Close leaves it
// open.
func NewFollowerOn(nc *nats.Conn, o Options) (*Follower, error) {
	if nc == nil {
		return nil, errs.New(errs.InvalidArgument, "cluster.NewFollowerOn: the connection is nil; pass a connected *nats.Conn, or use NewFollower")
	}
	o = followDefaults(o)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, errs.Wrap(Unreachable, err, "cluster: cannot use JetStream on "+nc.ConnectedUrlRedacted())
	}
	f := &Follower{o: o, nc: nc, js: js, leader: natsplugin.NewLeaderReader(nc, o.Stream)}
	f.stop, f.cancel = stdctx.WithCancelCause(stdctx.Background())
	return f, nil
}

// followDefaults fills what a follower needs with session.nats's
// defaults, so that it reads where a default session.nats writes.
func followDefaults(o Options) Options {
	d := natsplugin.Config{}.Defaults()
	if o.URL == "" {
		o.URL = d.URL
	}
	if o.Stream == "" {
		o.Stream = d.Stream
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = d.SubjectPrefix
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = d.ConnectTimeout
	}
	return o
}

// Close ends the follows in progress (they return FollowerClosed)
// and waits for them, then closes the connection if it is the
// follower's.
func (f *Follower) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	f.cancel(errFollowerClosed)
	f.running.Wait()
	if f.own {
		f.nc.Close()
	}
	return nil
}

// enter registers a follow or lookup; false once closed.
func (f *Follower) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.running.Add(1)
	return true
}

// LastSeq is the seq of the last event of the session that is in the
// stream: 0 for a session that is open somewhere (its lease is held) but
// has published nothing yet. A session with neither is SESSION_NOT_FOUND.
func (f *Follower) LastSeq(ctx stdctx.Context, sessionID string) (int64, error) {
	if !f.enter() {
		return 0, errFollowerClosed
	}
	defer f.running.Done()
	ctx, cancel := f.bind(ctx)
	defer cancel()
	subject, err := f.subject(sessionID)
	if err != nil {
		return 0, err
	}
	h, err := f.head(ctx, sessionID, subject)
	return h.seq, f.cause(ctx, err)
}

// Follow calls fn with each event of the session's log after seq after,
// in order, first those already in the stream, then each as it is
// published, until ctx ends (it returns ctx's error), fn returns an error
// (it returns that error) or the follower closes. Every seq comes once
// and none is skipped: a log whose seqs jump is refused with
// SESSION_BAD_LOG. after may be past the end of the stream (a client
// that saw events live from their writer before their checkpoint):
// nothing is delivered until the log passes it.
//
// A session open somewhere with no event published yet is followed until
// it has some; one neither in the stream nor leased is SESSION_NOT_FOUND,
// at once.
func (f *Follower) Follow(ctx stdctx.Context, sessionID string, after int64, fn func(session.Event) error) error {
	if after < 0 {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("cluster: cannot follow session %q after seq %d; seqs start at 1, so pass 0 for the whole log", sessionID, after))
	}
	if !f.enter() {
		return errFollowerClosed
	}
	defer f.running.Done()
	ctx, cancel := f.bind(ctx)
	defer cancel()
	subject, err := f.subject(sessionID)
	if err != nil {
		return err
	}
	err = f.follow(ctx, sessionID, subject, after, fn)
	return f.cause(ctx, err)
}

// bind ends ctx when the follower closes.
func (f *Follower) bind(ctx stdctx.Context) (stdctx.Context, stdctx.CancelFunc) {
	ctx, cancel := stdctx.WithCancelCause(ctx)
	stop := stdctx.AfterFunc(f.stop, func() { cancel(stdctx.Cause(f.stop)) })
	return ctx, func() { stop(); cancel(nil) }
}

// cause says why a follow that failed because ctx ended ended: the
// caller's context error, or the follower's closing.
func (f *Follower) cause(ctx stdctx.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if c := stdctx.Cause(ctx); c != nil {
			return c
		}
	}
	return err
}

func (f *Follower) follow(ctx stdctx.Context, sessionID, subject string, after int64, fn func(session.Event) error) error {
	tctx, tcancel := stdctx.WithTimeout(ctx, f.o.ConnectTimeout)
	h, err := f.head(tctx, sessionID, subject)
	if err != nil {
		tcancel()
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	switch {
	case h.stream == 0 || after == 0:
		// The whole log, from its first event.
	case h.seq <= after:
		// The client has everything stored (the common reconnect): read
		// only what comes after the last message. A later message of the
		// subject has a later stream sequence, so none is missed.
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = h.stream + 1
	default:
		start, err := f.find(tctx, sessionID, subject, h.stream, after+1)
		if err != nil {
			tcancel()
			return err
		}
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = start
	}
	cons, err := f.js.OrderedConsumer(tctx, f.o.Stream, cfg)
	tcancel()
	if err != nil {
		return f.failed(err, fmt.Sprintf("follow session %q", sessionID))
	}
	it, err := cons.Messages()
	if err != nil {
		return f.failed(err, fmt.Sprintf("follow session %q", sessionID))
	}
	defer f.drop(cons, it)
	// Next heeds ctx only while it waits for a message: while it
	// re-creates a consumer the server lost (it retries until the server
	// is back), only Stop ends it.
	stopOnDone := stdctx.AfterFunc(ctx, it.Stop)
	defer stopOnDone()
	delivered := after
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return f.failed(err, fmt.Sprintf("follow session %q", sessionID))
		}
		if natsplugin.IsOpenRecord(m.Headers()) {
			continue
		}
		var e session.Event
		jerr := json.Unmarshal(m.Data(), &e)
		if jerr == nil && e.Seq <= 0 {
			jerr = errors.New("it has no seq")
		}
		if jerr != nil {
			return errs.New(session.BadLog, fmt.Sprintf("cluster: a message of %s in stream %q is not a session event: %v; the session cannot be followed past it", subject, f.o.Stream, jerr))
		}
		if e.Seq <= delivered {
			continue
		}
		if e.Seq != delivered+1 {
			return errs.New(session.BadLog, fmt.Sprintf(
				"cluster: session %q jumps from event %d to %d in stream %q; the log lost events, so following it would show a gap", sessionID, delivered, e.Seq, f.o.Stream))
		}
		if err := fn(e); err != nil {
			return err
		}
		delivered = e.Seq
	}
}

// find is the stream sequence of event seq of the log on subject, whose
// last message is at stream sequence end, by bisection: a log's events
// are in seq order in the stream, so a long session is not read from its
// start for a client that resumes near its end.
func (f *Follower) find(ctx stdctx.Context, sessionID, subject string, end uint64, seq int64) (uint64, error) {
	found := end
	for lo, hi := uint64(1), end; lo <= hi; {
		mid := lo + (hi-lo)/2
		// The subject's first message at or after mid: there is one, as
		// the one at end is.
		m, err := f.leader.Next(ctx, subject, mid)
		if err != nil {
			return 0, f.failed(err, fmt.Sprintf("find event %d of session %q", seq, sessionID))
		}
		var e session.Event // the open record counts as event 0
		if natsplugin.IsOpenRecord(m.Header) {
		} else if err := json.Unmarshal(m.Data, &e); err != nil {
			return 0, errs.New(session.BadLog, fmt.Sprintf("cluster: message %d of %s in stream %q is not a session event: %v", m.Sequence, subject, f.o.Stream, err))
		}
		if e.Seq < seq {
			lo = m.Sequence + 1
		} else {
			found, hi = m.Sequence, mid-1
		}
	}
	return found, nil
}

// drop stops the consumer and deletes it on the server, which would
// otherwise keep it until its inactivity threshold: clients reconnect
// often, and each follow makes one.
func (f *Follower) drop(cons jetstream.Consumer, it jetstream.MessagesContext) {
	it.Stop()
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), f.o.ConnectTimeout)
	defer cancel()
	// Best effort: a consumer left behind expires by itself.
	_ = f.js.DeleteConsumer(ctx, f.o.Stream, info.Name)
}

// head is where a session's log ends: the stream sequence of its last
// message and that message's event seq, both 0 for a session leased but
// empty.
type head struct {
	stream uint64
	seq    int64
}

func (f *Follower) head(ctx stdctx.Context, sessionID, subject string) (head, error) {
	// Looked up first for its own error: a stream nobody created yet.
	if _, err := f.streamHandle(ctx); err != nil {
		return head{}, err
	}
	m, err := f.leader.Last(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return head{}, f.leased(ctx, sessionID)
	}
	if err != nil {
		return head{}, f.failed(err, fmt.Sprintf("read the end of session %q", sessionID))
	}
	if natsplugin.IsOpenRecord(m.Header) {
		// Opened, no event yet.
		return head{stream: m.Sequence}, nil
	}
	var e session.Event
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return head{}, errs.New(session.BadLog, fmt.Sprintf("cluster: the last message of %s in stream %q is not a session event: %v", subject, f.o.Stream, err))
	}
	return head{stream: m.Sequence, seq: e.Seq}, nil
}

// leased is nil when someone holds the session's lease: it is open there
// and its first events are still to come.
func (f *Follower) leased(ctx stdctx.Context, sessionID string) error {
	kv, err := f.js.KeyValue(ctx, natsplugin.LeaseBucket(f.o.Stream))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return f.notFound(sessionID)
	}
	if err != nil {
		return f.failed(err, fmt.Sprintf("read the lease of session %q", sessionID))
	}
	_, err = natsplugin.LeaderKV(kv, f.nc).Get(ctx, sessionID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return f.notFound(sessionID)
	}
	if err != nil {
		return f.failed(err, fmt.Sprintf("read the lease of session %q", sessionID))
	}
	return nil
}

func (f *Follower) streamHandle(ctx stdctx.Context) (jetstream.Stream, error) {
	f.mu.Lock()
	st := f.stream
	f.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := f.js.Stream(ctx, f.o.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, errs.New(session.NotFound, fmt.Sprintf(
			"cluster: the NATS server at %s has no stream %q, so no session is stored there; check cluster.stream, or start a host with session.nats, which creates it", f.o.URL, f.o.Stream))
	}
	if err != nil {
		return nil, f.failed(err, "look up the stream")
	}
	f.mu.Lock()
	f.stream = st
	f.mu.Unlock()
	return st, nil
}

func (f *Follower) subject(sessionID string) (string, error) {
	if !session.ValidID(sessionID) {
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf(
			"cluster: %q is not a session id; ids hold letters, digits, '.', '_' and '-', starting with a letter or digit", sessionID))
	}
	return natsplugin.Subject(f.o.SubjectPrefix, sessionID), nil
}

func (f *Follower) notFound(sessionID string) error {
	return errs.New(session.NotFound, fmt.Sprintf(
		"cluster: no session %q: stream %q has no event of it and no host holds its lease; GET /v1/sessions lists the sessions", sessionID, f.o.Stream))
}

func (f *Follower) failed(err error, what string) error {
	return errs.Wrap(Unreachable, err, fmt.Sprintf(
		"cluster: cannot %s in stream %q on %s; check that the NATS server is up and JetStream is enabled (retry: the client resumes from its last seq)", what, f.o.Stream, f.o.URL))
}
