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
