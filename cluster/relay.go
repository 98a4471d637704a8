package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/google/uuid"
)

// Approval questions are live, not durable: the hub of the owner asks
// them of the clients attached there, and the log never holds them. A
// client attached on another host answers them through a relay: the owner
// attaches an approving stream on the client's behalf and sends each
// question and settlement to the client host's inbox as a NATS request,
// which that host acknowledges; answers come back as the op "answer". The
// relay pings the inbox while it is quiet, so either side notices the
// other gone within RequestTimeout: a relay whose inbox stops answering
// detaches, and with no approving client left a question fails closed.

// relayMsg is one message of a relay to its inbox.
type relayMsg struct {
	Update *live.Update `json:"update,omitempty"`
	// End says the relay ended (the session closed on its owner, or the
	// owner is leaving), with why, as errs.Encode writes it.
	End json.RawMessage `json:"end,omitempty"`
}

// relays are the relays this host serves, by token.
type relays struct {
	mu sync.Mutex
	m  map[string]*relay
}

type relay struct {
	st     sessions.Stream
	cancel stdctx.CancelFunc
}

func (rs *relays) add(token string, r *relay) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*relay{}
	}
	rs.m[token] = r
}

func (rs *relays) get(token string) (*relay, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.m[token]
	return r, ok
}

func (rs *relays) remove(token string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, token)
}

// relayOp serves approve, answer and detach for a session open here.
func (h *Host) relayOp(ctx stdctx.Context, req request) (answer, error) {
	if req.Op == opApprove {
		var a approveArgs
		if err := decodeArgs(req, &a); err != nil {
			return answer{}, err
		}
		return h.startRelay(ctx, req.Session, a)
	}
	var a answerArgs
	if err := decodeArgs(req, &a); err != nil {
		return answer{}, err
	}
	r, ok := h.relays.get(a.Relay)
	if !ok {
		return answer{}, errs.New(live.Detached, fmt.Sprintf(
			"cluster: host %q relays no approvals of session %q under %q (the session moved, or the relay ended); attach again to answer its questions", h.o.HostID, req.Session, a.Relay))
	}
	if req.Op == opDetach {
		r.cancel()
		return answer{}, nil
	}
	return answer{}, r.st.Answer(a.Question, a.Answer)
}

// startRelay attaches an approving stream to session id for a client on
// another host and relays its questions to a.Inbox.
func (h *Host) startRelay(ctx stdctx.Context, id string, a approveArgs) (answer, error) {
	o := a.AttachOptions
	o.Approvals, o.FromEnd = true, true
	st, err := h.o.Sessions.Attach(ctx, id, o)
	if err != nil {
		return answer{}, err
	}
	token := uuid.NewString()
	rctx, cancel := stdctx.WithCancel(h.ctx)
	h.relays.add(token, &relay{st: st, cancel: cancel})
	h.mu.Lock()
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		h.relays.remove(token)
		cancel()
		return answer{}, errors.Join(errs.New(NoHost, fmt.Sprintf("cluster: host %q is leaving the cluster; attach again to the session's next owner", h.o.HostID)), st.Close())
	}
	// Counted with the drops: Close waits for it after cancelling h.ctx.
	h.drops.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.drops.Done()
		h.pump(rctx, token, id, st, a.Inbox)
	}()
	return result(token, nil)
}

// pump sends the relay's questions and settlements to inbox, and a ping
// while nothing else went for a third of RequestTimeout, until the stream
// ends, the inbox stops answering or ctx ends.
func (h *Host) pump(ctx stdctx.Context, token, id string, st sessions.Stream, inbox string) {
	defer h.relays.remove(token)
	defer st.Close()
	every := h.o.RequestTimeout / 3
	sent := time.Now()
	for {
		nctx, cancel := stdctx.WithTimeout(ctx, time.Until(sent.Add(every)))
		u, err := st.Next(nctx)
		// Quiet: nothing came for a third of RequestTimeout.
		quiet := err != nil && nctx.Err() != nil && ctx.Err() == nil
		cancel()
		var msg relayMsg
		switch {
		case err == nil && (u.Kind == live.KindQuestion || u.Kind == live.KindSettled):
			msg.Update = &u
		case err == nil && time.Since(sent) < every:
			continue // what the client's host streams from the log itself
		case err == nil, quiet:
			// A ping.
		default:
			if ctx.Err() != nil {
				err = errs.New(live.HubClosed, fmt.Sprintf("cluster: host %q stopped relaying the approvals of session %q (it is leaving, or the client detached); attach again", h.o.HostID, id))
			}
			msg.End, _ = errs.Encode(err)
			h.send(inbox, msg) // best effort: the client also notices the silence
			return
		}
		if err := h.send(inbox, msg); err != nil {
			h.log.Debug("cluster: a host relaying approvals stopped answering; the relay ends", "session", id, "error", err)
			return
		}
		sent = time.Now()
	}
}

// send sends msg to inbox and waits for its acknowledgement.
func (h *Host) send(inbox string, msg relayMsg) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	_, err = h.nc.Request(inbox, b, h.o.RequestTimeout)
	return err
}
