package nats

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// List describes every session of the stream. It reads each log whole:
// the stream keeps no index a crash could leave stale, and the subjects
// of the stream say which sessions exist.
func (s *store) List(ctx stdctx.Context) ([]session.Summary, error) {
	tctx, cancel := s.timeout(ctx)
	info, err := s.stream.Info(tctx, jetstream.WithSubjectFilter(s.cfg.SubjectPrefix+".>"))
	cancel()
	if err != nil {
		return nil, s.failed(err, "list the sessions")
	}
	out := make([]session.Summary, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		id := strings.ReplaceAll(strings.TrimPrefix(subject, s.cfg.SubjectPrefix+"."), "%2E", ".")
		out = append(out, s.summarize(ctx, id))
	}
	return out, nil
}

func (s *store) summarize(ctx stdctx.Context, id string) session.Summary {
	sum := session.Summary{ID: id, State: session.StateIdle}
	events, agent, err := s.read(ctx, id)
	if err != nil {
		sum.State, sum.Error = session.StateCorrupt, err.Error()
		return sum
	}
	if len(events) == 0 {
		// Opened, never prompted: only its open record is stored.
		return s.leased(ctx, sum)
	}
	first, last := events[0], events[len(events)-1]
	sum.Agent, sum.Created, sum.Updated, sum.Turns = agent, first.Time, last.Time, last.Turn
	for _, e := range events {
		if raw, err := json.Marshal(e); err == nil {
			sum.Size += int64(len(raw))
		}
		if sum.Title == "" && e.Type == session.UserMessage && e.Message != nil {
			sum.Title = session.Title(e.Message.Content)
		}
	}
	if last.Type != session.TurnEnd {
		sum.State = session.StateInterrupted
	}
	return s.leased(ctx, sum)
}

// leased marks sum open when a host holds the session's lease.
func (s *store) leased(ctx stdctx.Context, sum session.Summary) session.Summary {
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	if e, err := s.leases.Get(tctx, sum.ID); err == nil {
		var h LeaseRecord
		json.Unmarshal(e.Value(), &h)
		sum.State, sum.Holder = session.StateOpen, h.Holder
	}
	return sum
}

// Delete purges a session's subject under its lease: a session another
// writer holds is refused with SessionLocked naming the holder, and
// nothing is removed.
func (s *store) Delete(ctx stdctx.Context, sessionID string) error {
	subject, err := s.subject(sessionID)
	if err != nil {
		return err
	}
	tctx, cancel := s.timeout(ctx)
	defer cancel()
	last, err := s.lastSeq(tctx, subject)
	if err != nil {
		return err
	}
	if last == 0 {
		return s.notFound(sessionID)
	}
	l, err := s.acquire(tctx, sessionID)
	if err != nil {
		if errs.HasCode(err, session.SessionLocked) {
			return errs.Wrap(session.SessionLocked, err, fmt.Sprintf(
				"cannot delete session %q while it is open", sessionID)).WithReason(errs.ReasonOf(err))
		}
		return err
	}
	perr := s.stream.Purge(tctx, jetstream.WithPurgeSubject(subject))
	rerr := l.release()
	if perr != nil {
		return s.failed(perr, fmt.Sprintf("purge session %q", sessionID))
	}
	return rerr
}
