package serve

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// pingEvery keeps proxies from closing an idle stream (a variable for the
// tests).
var pingEvery = 15 * time.Second

// resumePoint reads where a stream starts: Last-Event-ID ("<seq>-<notice>"
// or "<seq>"), else ?after=<seq>; none is the start.
func resumePoint(r *http.Request) (seq, notice int64, err error) {
	v := r.Header.Get("Last-Event-ID")
	from := "Last-Event-ID"
	if v == "" {
		v, from = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, 0, nil
	}
	s, n, hasNotice := strings.Cut(v, "-")
	seq, err = strconv.ParseInt(s, 10, 64)
	if err == nil && hasNotice {
		notice, err = strconv.ParseInt(n, 10, 64)
	}
	if err != nil || seq < 0 || notice < 0 {
		return 0, 0, fail(http.StatusBadRequest, BadRequest, "%s %q is not a resume point; send the id of the last event received (\"<seq>-<notice>\" or \"<seq>\")", from, v)
	}
	return seq, notice, nil
}

// stream serves GET /v1/sessions/{id}/stream: the live event contract as
// Server-Sent Events, from the session service's Stream. It ends when the
// client goes, the session closes or the server shuts down; the client
// reconnects with Last-Event-ID. What the stream carries is the service's:
// a cluster's, for a session another host runs, streams its durable events
// only, and the notice part of the resume point then comes back unchanged.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	seq, notice, err := resumePoint(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := stdctx.WithCancel(r.Context())
	defer cancel()
	stopOnShutdown := stdctx.AfterFunc(s.streams, cancel)
	defer stopOnShutdown()

	_, approving := s.holding(id)
	// The stream re-attaches itself when it falls behind the hub, from
	// what it was sent: the client still sees every seq once.
	st, err := s.o.Sessions.Attach(ctx, id, sessions.AttachOptions{AfterSeq: seq, AfterNotice: notice, Approvals: approving, Name: "stream"})
	if err != nil {
		s.writeError(w, r, s.notOpen(r.Context(), id, err))
		return
	}
	defer func() { _ = st.Close() }()
	defer subscribed(ctx)()
	in, _ := s.info(ctx, id)

	out, unblock, ok := s.startStream(w, r, id, seq, notice, in.LastSeq)
	if !ok {
		return
	}
	defer unblock()

	wait := keepAlive(ctx, cancel, out)
	defer wait()
	defer cancel()

	reattached := 0
	for {
		u, err := st.Next(ctx)
		if n := st.Reattaches(); n > reattached {
			reattached = n
			s.log.Debug("a stream fell behind the hub and was re-attached from its last seq", "session", id, "seq", st.LastSeq())
		}
		switch {
		case err == nil:
			// The common case: no error code to look for.
		case errs.HasCode(err, live.HubClosed) && ctx.Err() == nil:
			s.sendEnd(out, id)
			return
		case err != nil:
			s.log.Debug("stream ended", "session", id, "error", err)
			return
		}
		if u.Kind == live.KindToolStart {
			// Not part of the SSE API (yet): the page marks calls by
			// their events.
			continue
		}
		data, err := json.Marshal(u)
		if err != nil {
			s.log.Error("an update could not be encoded", "session", id, "kind", u.Kind, "error", err)
			return
		}
		withID := false
		seq, notes := out.seq, out.notes
		switch u.Kind {
		case live.KindEvent:
			seq, withID = u.Seq, true
		case live.KindNotice:
			notes, withID = u.Notice.ID, true
		}
		if err := out.send(string(u.Kind), data, withID, seq, notes); err != nil {
			s.streamFailed(out, id, err)
			return
		}
	}
}

// startStream begins an SSE response resuming at seq and notice, and sends
// ready with the session's last seq. A client that stopped reading leaves
// a write blocked, which no context reaches: at shutdown, the stream's
// writes fail at once (not on the handler's own return, which must end
// the response cleanly); unblock ends that watch. ok is false when ready
// could not be sent.
func (s *Server) startStream(w http.ResponseWriter, r *http.Request, id string, seq, notice, last int64) (out *sse, unblock func(), ok bool) {
	out = beginSSE(w, r, seq, notice, s.limits)
	stop := stdctx.AfterFunc(s.streams, out.stop)
	unblock = func() { stop() }
	ready, _ := json.Marshal(map[string]any{"session": id, "last_seq": max(last, seq)})
	if out.send("ready", ready, false, seq, notice) != nil {
		unblock()
		return nil, nil, false
	}
	return out, unblock, true
}

// streamFailed ends a stream whose message could not go out: a client
// that left more than the buffer unread is told, in a drop message, where
// to resume from; one whose write blocked past the timeout cannot be
// told anything more, and its connection is cut.
func (s *Server) streamFailed(out *sse, id string, err error) {
	switch {
	case errors.Is(err, errBehind):
		last := out.lastID()
		s.log.Info("a stream's client fell behind; it is dropped and told to resume", "session", id, "last_id", last, "buffer", s.limits.buffer)
		data, _ := json.Marshal(streamDrop{Kind: "drop", Session: id, LastID: last, LastSeq: out.seq, Reconnect: true, Code: StreamBehind,
			Message: fmt.Sprintf("this client left more than %d bytes of the stream unread; reconnect with Last-Event-ID %s", s.limits.buffer, last)})
		_ = out.sendLast("drop", data)
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.log.Info("a stream's client read nothing for the write timeout; its connection is cut", "session", id, "timeout", s.limits.timeout)
	default:
		s.log.Debug("stream ended", "session", id, "error", err)
	}
}
