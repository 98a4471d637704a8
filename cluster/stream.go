package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// remoteStream is the Stream of a session open on another host: its
// durable events as the log receives them (Follower), and, when attached
// with Approvals, the owner's questions through a relay (relay.go).
//
// It follows the session, not the host. The log is shared: whichever host
// writes it next, its events keep coming, in order, none twice, none
// skipped. The relay is the owner's: when it ends or falls silent, the
// stream reads the session's lease and attaches a relay again on the host
// that holds it now — the next owner, once a host adopts the session of
// one that died. It ends as a local stream ends, with live.HubClosed, when
// the session closes on its owner (the owner releases its lease), once
// every event of the log has been read; and with OwnerUnreachable when
// its relay is lost and no host takes the session within the lease's TTL.
type remoteStream struct {
	h  *Host
	f  *Follower
	id string
	o  sessions.AttachOptions

	// updates carries the log's events, asks the relay's questions and
	// settlements (apart, so a reader behind on events never makes the
	// relay drop a question); failed, once closed, the error Next
	// returns after them.
	updates chan live.Update
	asks    chan live.Update
	failed  chan struct{}
	failErr error
	failMu  sync.Once

	last atomic.Int64 // the seq of the last event Next returned
	// followed is the seq of the last event put into updates; end, once
	// the session closed on its owner, 1 + the seq its log ends at.
	followed  atomic.Int64
	end       atomic.Int64
	closing   atomic.Bool
	endFollow stdctx.CancelCauseFunc

	stop    stdctx.CancelFunc
	running sync.WaitGroup

	// lease hears the writes of the session's lease: a release is its
	// close, a new holder where the relay goes.
	lease     *nats.Subscription
	leaseMsgs chan *nats.Msg

	// relayEnded is signalled when the relay said it ended.
	relayEnded chan struct{}
	mu         sync.Mutex
	link       *relayLink // the relay now, nil without Approvals

	closeOnce sync.Once
}

// relayLink is one relay of the session's questions, on one owner.
type relayLink struct {
	host  string // the owner that serves it
	token string
	sub   *nats.Subscription // its inbox
	// heard is when its last message came, or it started (unix nanos);
	// got when its last message came, 0 before any. tried is when a
	// relay was last asked of its host.
	heard, got atomic.Int64
	tried      time.Time
}

// errFollowEnded ends the follow of a stream whose session closed.
var errFollowEnded = errors.New("cluster: the session closed and its log was read to its end")

func (s *Service) attachRemote(ctx stdctx.Context, h *Host, id, owner string, o sessions.AttachOptions) (sessions.Stream, error) {
	after := o.AfterSeq
	if o.FromEnd {
		seq, err := s.follower.LastSeq(ctx, id)
		if err != nil {
			return nil, err
		}
		after = seq
	}
	sctx, stop := stdctx.WithCancel(h.ctx)
	st := &remoteStream{h: h, f: s.follower, id: id, o: o,
		updates: make(chan live.Update, 16), asks: make(chan live.Update, 16), failed: make(chan struct{}),
		stop: stop, leaseMsgs: make(chan *nats.Msg, 64), relayEnded: make(chan struct{}, 1)}
	st.last.Store(after)
	st.followed.Store(after)
	// Heard before the lease is read, so no release falls between.
	sub, err := h.nc.ChanSubscribe(natsplugin.KVSubject(h.leases.Bucket(), id), st.leaseMsgs)
	if err != nil {
		stop()
		return nil, h.connFailed(err, "the session's owner")
	}
	st.lease = sub
	if o.Approvals {
		if err := st.startRelay(ctx, owner); err != nil {
			stop()
			sub.Unsubscribe()
			return nil, err
		}
	}
	fctx, endFollow := stdctx.WithCancelCause(sctx)
	st.endFollow = endFollow
	st.running.Add(2)
	go func() {
		defer st.running.Done()
		err := s.follower.Follow(fctx, id, after, func(e session.Event) error {
			select {
			case st.updates <- live.Update{Kind: live.KindEvent, Seq: e.Seq, Event: &e}:
			case <-fctx.Done():
				return fctx.Err()
			}
			st.followed.Store(e.Seq)
			if st.readToEnd() {
				return errFollowEnded
			}
			return nil
		})
		if sctx.Err() == nil {
			st.fail(err)
		}
	}()
	go func() {
		defer st.running.Done()
		st.watch(sctx)
	}()
	return st, nil
}

// startRelay asks the session's owner, host, to relay its questions to
// an inbox of this host's, and makes that relay the stream's.
func (st *remoteStream) startRelay(ctx stdctx.Context, host string) error {
	h := st.h
	l := &relayLink{host: host, tried: time.Now()}
	l.heard.Store(time.Now().UnixNano())
	sub, err := h.nc.Subscribe(h.nc.NewInbox(), func(m *nats.Msg) { st.relayed(l, m) })
	if err != nil {
		return h.connFailed(err, "the session's owner")
	}
	l.sub = sub
	if err := h.call(ctx, opApprove, st.id, approveArgs{AttachOptions: st.o, Inbox: sub.Subject}, &l.token); err != nil {
		sub.Unsubscribe()
		return err
	}
	st.mu.Lock()
	old := st.link
	st.link = l
	st.mu.Unlock()
	if old != nil {
		// The old owner's relay ends when its inbox stops answering.
		old.sub.Unsubscribe()
	}
	return nil
}

func (st *remoteStream) current() *relayLink {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.link
}

// relayed takes one message of relay l: an update for Next, a ping, or
// the relay's end. It acknowledges what it took; an update Next has no
// room for is not acknowledged, and the owner ends the relay. A relay the
// stream replaced is only acknowledged.
func (st *remoteStream) relayed(l *relayLink, m *nats.Msg) {
	now := time.Now().UnixNano()
	l.heard.Store(now)
	l.got.Store(now)
	if st.current() != l {
		_ = m.Respond(nil)
		return
	}
	var msg relayMsg
	if err := json.Unmarshal(m.Data, &msg); err != nil {
		st.fail(errs.Wrap(errs.Internal, err, "cluster: the session's owner relayed a message that cannot be read; do all hosts run the same dsh version?"))
		return
	}
	switch {
	case msg.Update != nil:
		select {
		case st.asks <- *msg.Update:
		default:
			return
		}
	case len(msg.End) > 0:
		// Why it ended is the lease's to tell: a session closed, or
		// moving to another host.
		select {
		case st.relayEnded <- struct{}{}:
		default:
		}
	}
	_ = m.Respond(nil)
}

// watch follows the session's lease — its release closes the stream — and,
// with Approvals, keeps a relay on whichever host holds it.
func (st *remoteStream) watch(ctx stdctx.Context) {
	limit := st.h.o.RequestTimeout
	t := time.NewTicker(limit / 3)
	defer t.Stop()
	if held, err := st.h.leaseOf(ctx, st.id); err == nil && held.released {
		st.closedOnOwner(ctx)
	}
	// lost is when the relay was found ended or silent; zero while it
	// lives. Only a message of a relay makes it live again.
	var lost time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.failed:
			return
		case m := <-st.leaseMsgs:
			if deleted, _ := natsplugin.KVRemoved(m.Header); deleted {
				st.closedOnOwner(ctx)
			}
			// A put names the holder, which the relay is checked against
			// below.
		case <-st.relayEnded:
			if lost.IsZero() {
				lost = time.Now()
			}
		case <-t.C:
		}
		l := st.current()
		if l == nil || st.closing.Load() {
			continue
		}
		switch {
		case !lost.IsZero() && time.Unix(0, l.got.Load()).After(lost):
			// A relay spoke since it was lost: a new one, or the old one
			// back from a stall.
			lost = time.Time{}
		case lost.IsZero() && time.Since(time.Unix(0, l.heard.Load())) > limit:
			lost = time.Now()
		}
		if lost.IsZero() {
			continue
		}
		lease, err := st.h.leaseOf(ctx, st.id)
		switch {
		case err != nil:
		case lease.released:
			st.closedOnOwner(ctx)
			continue
		case lease.holder != "" && (lease.holder != l.host || time.Since(l.tried) > limit):
			// The session's owner now, or the same one asked again: a
			// relay that ended on its side while the host lives.
			l.tried = time.Now()
			if err := st.startRelay(ctx, lease.holder); err != nil {
				st.h.log.Debug("cluster: cannot relay the approvals of a session from its owner yet", "session", st.id, "owner", lease.holder, "error", err)
			}
		}
		if time.Since(lost) > st.h.o.LeaseTTL+3*limit {
			st.fail(errs.New(OwnerUnreachable, fmt.Sprintf(
				"cluster: the host running session %q stopped relaying its approvals %s ago and no host took the session over since; attach again (the session's next owner relays them)", st.id, time.Since(lost).Round(time.Millisecond))).WithReason(ReasonTimeout))
			return
		}
	}
}

// closedOnOwner ends the stream once its log is read to where it ends:
// the session closed on its owner, which flushed the log before it
// released the lease.
func (st *remoteStream) closedOnOwner(ctx stdctx.Context) {
	if !st.closing.CompareAndSwap(false, true) {
		return
	}
	seq, err := st.f.LastSeq(ctx, st.id)
	if err != nil && !errs.HasCode(err, session.NotFound) {
		if ctx.Err() == nil {
			st.fail(err)
		}
		return
	}
	st.end.Store(seq + 1)
	st.readToEnd()
}

// readToEnd ends the stream, and its follow, when the session closed and
// every event of its log is in updates.
func (st *remoteStream) readToEnd() bool {
	end := st.end.Load()
	if end == 0 || st.followed.Load() < end-1 {
		return false
	}
	st.fail(errs.New(live.HubClosed, fmt.Sprintf("cluster: session %q closed on its host; ensure it again to go on", st.id)))
	st.endFollow(errFollowEnded)
	return true
}

// lease is what the lease bucket says of a session: released (its last
// write a delete: it closed), or held by holder, or neither (it expired
// and nobody took it yet, or it was never taken).
type lease struct {
	released bool
	holder   string
}

// leaseOf reads session id's lease from the bucket's leader.
func (h *Host) leaseOf(ctx stdctx.Context, id string) (lease, error) {
	tctx, cancel := stdctx.WithTimeout(ctx, h.o.ConnectTimeout)
	defer cancel()
	bucket := h.leases.Bucket()
	m, err := natsplugin.NewLeaderReader(h.nc, natsplugin.KVStream(bucket)).Last(tctx, natsplugin.KVSubject(bucket, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return lease{}, nil
	}
	if err != nil {
		return lease{}, errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot read the lease of session %q in bucket %q", id, bucket))
	}
	deleted, expired := natsplugin.KVRemoved(m.Header)
	if deleted || expired {
		return lease{released: deleted}, nil
	}
	var rec natsplugin.LeaseRecord
	if json.Unmarshal(m.Data, &rec) != nil {
		return lease{}, nil
	}
	return lease{holder: rec.HostID}, nil
}

// fail ends the stream with err once the updates before it are read.
func (st *remoteStream) fail(err error) {
	st.failMu.Do(func() {
		if err == nil {
			err = errs.New(live.HubClosed, fmt.Sprintf("cluster: the stream of session %q ended", st.id))
		}
		st.failErr = err
		close(st.failed)
	})
}

func (st *remoteStream) Next(ctx stdctx.Context) (live.Update, error) {
	// A question first: the turn waits for its answer.
	select {
	case u := <-st.asks:
		return u, nil
	default:
	}
	select {
	case u := <-st.asks:
		return u, nil
	case u := <-st.updates:
		return st.took(u), nil
	case <-st.failed:
		// What came before the end is read first.
		select {
		case u := <-st.asks:
			return u, nil
		case u := <-st.updates:
			return st.took(u), nil
		default:
		}
		return live.Update{}, st.failErr
	case <-ctx.Done():
		return live.Update{}, stdctx.Cause(ctx)
	}
}

func (st *remoteStream) took(u live.Update) live.Update {
	if u.Kind == live.KindEvent {
		st.last.Store(u.Seq)
	}
	return u
}

// Answer sends the answer to the owner's relay.
func (st *remoteStream) Answer(id int64, a approval.Answer) error {
	l := st.current()
	if l == nil {
		return errs.New(live.NotApprover, fmt.Sprintf("cluster: this stream of session %q did not attach to answer approvals; attach with Approvals set", st.id))
	}
	ctx, cancel := stdctx.WithTimeout(st.h.ctx, st.h.o.RequestTimeout+st.h.o.ConnectTimeout)
	defer cancel()
	return st.h.call(ctx, opAnswer, st.id, answerArgs{Relay: l.token, Question: id, Answer: a}, nil)
}

func (st *remoteStream) LastSeq() int64 { return st.last.Load() }

// Reattaches is 0: the log is read from where the stream is, it never
// falls behind a hub.
func (st *remoteStream) Reattaches() int { return 0 }

// Close stops following and ends the relay on the owner.
func (st *remoteStream) Close() error {
	var err error
	st.closeOnce.Do(func() {
		st.fail(errs.New(live.Detached, fmt.Sprintf("cluster: the stream of session %q was closed", st.id)))
		st.stop()
		if uerr := st.lease.Unsubscribe(); uerr != nil && !errors.Is(uerr, nats.ErrConnectionClosed) {
			err = uerr
		}
		st.running.Wait()
		l := st.current()
		if l == nil {
			return
		}
		if uerr := l.sub.Unsubscribe(); uerr != nil && !errors.Is(uerr, nats.ErrConnectionClosed) && err == nil {
			err = uerr
		}
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), st.h.o.ConnectTimeout)
		defer cancel()
		// Best effort: a relay whose inbox is gone ends by itself.
		_ = st.h.call(ctx, opDetach, st.id, answerArgs{Relay: l.token}, nil)
	})
	return err
}
