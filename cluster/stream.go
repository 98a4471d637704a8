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
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/nats-io/nats.go"
)

// remoteStream is the Stream of a session open on another host: its
// durable events as the log receives them (Follower), and, when attached
// with Approvals, the owner's questions through a relay (relay.go).
type remoteStream struct {
	h  *Host
	id string

	// updates carries the log's events, asks the relay's questions and
	// settlements (apart, so a reader behind on events never makes the
	// relay drop a question); failed, once closed, the error Next
	// returns after them.
	updates chan live.Update
	asks    chan live.Update
	failed  chan struct{}
	failErr error
	failMu  sync.Once

	last atomic.Int64

	stop    stdctx.CancelFunc
	running sync.WaitGroup

	// The relay, when attached with Approvals.
	relay string
	sub   *nats.Subscription
	heard atomic.Int64 // unix nanos of the relay's last message

	closeOnce sync.Once
}

func (s *Service) attachRemote(ctx stdctx.Context, h *Host, id string, o sessions.AttachOptions) (sessions.Stream, error) {
	after := o.AfterSeq
	if o.FromEnd {
		seq, err := s.follower.LastSeq(ctx, id)
		if err != nil {
			return nil, err
		}
		after = seq
	}
	sctx, stop := stdctx.WithCancel(h.ctx)
	st := &remoteStream{h: h, id: id, updates: make(chan live.Update, 16), asks: make(chan live.Update, 16), failed: make(chan struct{}), stop: stop}
	st.last.Store(after)
	if o.Approvals {
		if err := st.startRelay(ctx, sctx, o); err != nil {
			stop()
			return nil, err
		}
	}
	st.running.Add(1)
	go func() {
		defer st.running.Done()
		err := s.follower.Follow(sctx, id, after, func(e session.Event) error {
			select {
			case st.updates <- live.Update{Kind: live.KindEvent, Seq: e.Seq, Event: &e}:
				return nil
			case <-sctx.Done():
				return sctx.Err()
			}
		})
		if sctx.Err() == nil {
			st.fail(err)
		}
	}()
	return st, nil
}

// startRelay asks the owner to relay the session's questions to an inbox
// of this host's, and watches that the relay stays alive.
func (st *remoteStream) startRelay(ctx, sctx stdctx.Context, o sessions.AttachOptions) error {
	h := st.h
	inbox := h.nc.NewInbox()
	sub, err := h.nc.Subscribe(inbox, st.relayed)
	if err != nil {
		return h.connFailed(err, "the session's owner")
	}
	st.sub = sub
	st.heard.Store(time.Now().UnixNano())
	var token string
	if err := h.call(ctx, opApprove, st.id, approveArgs{AttachOptions: o, Inbox: inbox}, &token); err != nil {
		sub.Unsubscribe()
		return err
	}
	st.relay = token
	st.running.Add(1)
	go func() {
		defer st.running.Done()
		st.watchRelay(sctx)
	}()
	return nil
}

// relayed takes one message of the relay: an update for Next, a ping, or
// the relay's end. It acknowledges what it took; an update Next has no
// room for is not acknowledged, and the owner ends the relay.
func (st *remoteStream) relayed(m *nats.Msg) {
	st.heard.Store(time.Now().UnixNano())
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
		err, derr := errs.Decode(msg.End)
		if derr != nil {
			err = derr
		}
		st.fail(err)
	}
	_ = m.Respond(nil)
}

// watchRelay ends the stream when the owner's relay falls silent for
// longer than RequestTimeout: the owner died or stalled, so its questions
// can no longer be answered from here.
func (st *remoteStream) watchRelay(ctx stdctx.Context) {
	limit := st.h.o.RequestTimeout
	t := time.NewTicker(limit / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.failed:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, st.heard.Load())) > limit {
			st.fail(errs.New(OwnerUnreachable, fmt.Sprintf(
				"cluster: the host running session %q stopped relaying its approvals for %s; attach again (the session's next owner relays them)", st.id, limit)).WithReason(ReasonTimeout))
			return
		}
	}
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
	if st.relay == "" {
		return errs.New(live.NotApprover, fmt.Sprintf("cluster: this stream of session %q did not attach to answer approvals; attach with Approvals set", st.id))
	}
	ctx, cancel := stdctx.WithTimeout(st.h.ctx, st.h.o.RequestTimeout+st.h.o.ConnectTimeout)
	defer cancel()
	return st.h.call(ctx, opAnswer, st.id, answerArgs{Relay: st.relay, Question: id, Answer: a}, nil)
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
		if st.sub != nil {
			if uerr := st.sub.Unsubscribe(); uerr != nil && !errors.Is(uerr, nats.ErrConnectionClosed) {
				err = uerr
			}
		}
		st.running.Wait()
		if st.relay != "" {
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), st.h.o.ConnectTimeout)
			defer cancel()
			// Best effort: a relay whose inbox is gone ends by itself.
			_ = st.h.call(ctx, opDetach, st.id, answerArgs{Relay: st.relay}, nil)
		}
	})
	return err
}
