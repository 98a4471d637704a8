package serve

import (
	stdctx "context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// Remote reads the logs of sessions open on other hosts of a cluster (or
// on none), so that a client behind a load balancer can stream a session
// from whichever host it reaches; cluster.Follower is one.
type Remote interface {
	// LastSeq is the seq of the session's last stored event, 0 for a
	// session open somewhere that stored none yet; an unknown session is
	// SESSION_NOT_FOUND.
	LastSeq(ctx stdctx.Context, sessionID string) (int64, error)
	// Follow calls fn with each stored event after seq after, in order
	// and each once, then with each new one as it is stored, until ctx
	// ends or fn fails.
	Follow(ctx stdctx.Context, sessionID string, after int64, fn func(session.Event) error) error
}

// streamRemote serves GET .../stream for a session that is not open here,
// from Options.Remote. Such a stream carries durable events only: the
// chunks of a message being generated, the notices and the approval
// questions live in the hub of the host that has the session open, and
// an event arrives once its writer stores it: when the prompt is recorded
// and when the turn ends. Its messages are those of a local stream's
// durable events, with the same ids, so the client resumes on any host
// with Last-Event-ID.
func (s *Server) streamRemote(w http.ResponseWriter, r *http.Request, id string, seq, notice int64) {
	last, err := s.o.Remote.LastSeq(r.Context(), id)
	if errs.HasCode(err, session.NotFound) || errs.HasCode(err, errs.InvalidArgument) {
		// Answered as for a session unknown here: an id that cannot name
		// a session names none.
		err = notFound(id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := stdctx.WithCancel(r.Context())
	defer cancel()
	stopOnShutdown := stdctx.AfterFunc(s.streams, cancel)
	defer stopOnShutdown()

	// The notice part of the resume point is sent back unchanged: this
	// stream has no notices, and the client keeps its place in those of
	// the hub it streams from next.
	// A seq past the stored end is no error here, as it is for a local
	// stream: the client may have seen the events live from their writer
	// before their checkpoint stored them.
	out, unblock, ok := s.startStream(w, id, seq, notice, last)
	if !ok {
		return
	}
	defer unblock()
	wait := keepAlive(ctx, cancel, out)
	defer wait()
	defer cancel()

	err = s.o.Remote.Follow(ctx, id, seq, func(e session.Event) error {
		data, err := json.Marshal(live.Update{Kind: live.KindEvent, Seq: e.Seq, Event: &e})
		if err != nil {
			return err
		}
		out.seq = e.Seq
		return out.send(string(live.KindEvent), data, true)
	})
	if err != nil && ctx.Err() == nil {
		// The client reconnects with its Last-Event-ID, here or elsewhere.
		s.log.Warn("a remote stream ended", "session", id, "seq", out.seq, "error", err)
	}
}

// beginSSE answers 200 with the headers of a stream.
func beginSSE(w http.ResponseWriter, seq, notice int64) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w), seq: seq, notes: notice}
}

// keepAlive pings out until ctx ends, and cancels the stream when a ping
// cannot be written; wait returns once it stopped.
func keepAlive(ctx stdctx.Context, cancel stdctx.CancelFunc, out *sse) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if out.ping() != nil {
					cancel()
					return
				}
			}
		}
	}()
	return func() { <-done }
}
