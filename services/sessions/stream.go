package sessions

import (
	stdctx "context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// loadRetries bounds how often in a row a stream retries reading events
// older than the hub's window before it gives the error to its reader.
const loadRetries = 3

// localStream is the Stream of a session open here. When the hub drops
// it for falling behind, it attaches again from the last seq and notice
// it returned — the new attachment taken before the old one goes, so the
// session keeps an owner — and its reader never sees the drop.
type localStream struct {
	s *Session
	o AttachOptions

	// Owned by the goroutine calling Next.
	notice int64
	failed int
	// reattached counts the re-attaches; read from any goroutine.
	reattached atomic.Int64

	mu     sync.Mutex
	tab    *Attachment
	c      streamClient
	closed bool
}

func (st *localStream) client() (streamClient, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.c, st.closed
}

func (st *localStream) Next(ctx stdctx.Context) (live.Update, error) {
	for {
		c, closed := st.client()
		u, err := c.Next(ctx)
		switch {
		case err == nil:
			st.failed = 0
			if u.Kind == live.KindNotice {
				st.notice = u.Notice.ID
			}
			return u, nil
		case errs.HasCode(err, live.Overflow) && !closed:
			if rerr := st.reattach(ctx, c); rerr != nil {
				return live.Update{}, errors.Join(err, rerr)
			}
		case errs.HasCode(err, live.LoadFailed) && st.failed < loadRetries:
			// The client stays attached: reading again may succeed.
			st.failed++
		default:
			return u, err
		}
	}
}

// reattach replaces the dropped client c with one attached after the last
// seq and notice it returned.
func (st *localStream) reattach(ctx stdctx.Context, c streamClient) error {
	o := st.o
	o.AfterSeq, o.AfterNotice, o.FromEnd = c.LastSeq(), st.notice, false
	tab, err := st.s.Attach(ctx, o)
	if err != nil {
		return errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("session %q: the stream fell behind and could not attach again after seq %d", st.s.id, o.AfterSeq))
	}
	next, ok := tab.client.(streamClient)
	if !ok {
		return errors.Join(errs.New(errs.Internal, "sessions: the hub's client cannot stream"), tab.Detach(stdctx.Background()))
	}
	st.mu.Lock()
	old := st.tab
	if st.closed {
		st.mu.Unlock()
		return errors.Join(errs.New(live.Detached, fmt.Sprintf("the stream of session %q was closed", st.s.id)), tab.Detach(stdctx.Background()))
	}
	st.tab, st.c = tab, next
	st.mu.Unlock()
	st.reattached.Add(1)
	return old.Detach(stdctx.Background())
}

func (st *localStream) Answer(id int64, a approval.Answer) error {
	c, _ := st.client()
	err := c.Answer(id, a)
	if errs.HasCode(err, live.Detached) || errs.HasCode(err, live.HubClosed) {
		return errs.Wrap(Closed, err, fmt.Sprintf("session %q is closing, or this stream was closed; question %d can no longer be answered through it", st.s.id, id))
	}
	return err
}

func (st *localStream) Reattaches() int { return int(st.reattached.Load()) }

func (st *localStream) LastSeq() int64 {
	c, _ := st.client()
	return c.LastSeq()
}

// Close detaches the stream; the session closes with it only when it was
// its last owner and does not keep running.
func (st *localStream) Close() error {
	st.mu.Lock()
	st.closed = true
	tab := st.tab
	st.mu.Unlock()
	return tab.Detach(stdctx.Background())
}
