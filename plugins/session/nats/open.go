package nats

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// markOpen stores the open record of a session that has no log yet, under
// the lease just taken, and returns its stream sequence. Without it a
// session opened and not yet prompted would exist only in the memory of
// the host that opened it: a host that died then would take it along, and
// every later message for it would find no session.
func (s *store) markOpen(ctx stdctx.Context, subject, token string) (uint64, error) {
	m := natsgo.NewMsg(subject)
	m.Header.Set(OpenHeader, "1")
	ack, err := s.js.PublishMsg(ctx, m,
		jetstream.WithExpectLastSequencePerSubject(0),
		jetstream.WithMsgID(token+":open"))
	if wrongLast(err) {
		// A previous holder's append landed after the lease changed
		// hands: the session is not new, and this open must not hide it.
		return 0, errs.New(session.SessionLocked, fmt.Sprintf(
			"session.nats: the log %s got its first event from another writer while this host opened the session; open it again to resume what is stored", subject)).WithReason(session.ReasonFenced)
	}
	if err != nil {
		return 0, s.failed(err, "store the open record of "+subject)
	}
	return ack.Sequence, nil
}

// firstSeq is the stream sequence of the first message on subject, which
// has one.
func (s *store) firstSeq(ctx stdctx.Context, subject string) (uint64, error) {
	m, err := s.leader.First(ctx, subject)
	if err != nil {
		return 0, s.failed(err, "read the start of "+subject)
	}
	return m.Sequence, nil
}

// Born is the stream sequence of the first message of the session's log
// (its open record, for a session opened since they exist). It tells this
// session from another one under the same id, opened after a delete.
func (wr *writer) Born() uint64 { return wr.born }
