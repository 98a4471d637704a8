package sessions

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// Ensure opens, resumes or joins a session; see Service.Ensure. A session
// it opens keeps running until Close: nobody owns it, so Stream clients
// come and go without closing it.
func (c *Controller) Ensure(ctx stdctx.Context, o EnsureOptions) (Info, error) {
	if o.Agent == "" {
		return Info{}, errs.New(errs.InvalidArgument, "sessions.Ensure: EnsureOptions.Agent is empty; name the configured agent (or template) the session runs")
	}
	if ctx == nil {
		ctx = stdctx.Background()
	}
	for {
		if o.SessionID != "" {
			s, opening, err := c.lookup(o.SessionID, o.Mode)
			switch {
			case err != nil:
				return Info{}, err
			case s != nil:
				return s.info(HowJoined), nil
			case opening != nil:
				// Another caller is opening it: its end is the signal,
				// whichever way the open went.
				select {
				case <-opening:
					continue
				case <-ctx.Done():
					return Info{}, stdctx.Cause(ctx)
				}
			}
		}
		s, how, err := c.ensureOpen(ctx, o)
		if errs.Has(err, session.SessionLocked, ReasonOpenHere) && o.Mode != EnsureCreate {
			// An open of the same id started between the look and ours:
			// the next look joins it or waits for it.
			continue
		}
		if err != nil {
			return Info{}, err
		}
		s.unhold()
		return s.info(how), nil
	}
}

// lookup finds session id open here, or the channel of its open in
// flight; a session still closing, or any for EnsureCreate, is refused.
func (c *Controller) lookup(id string, mode EnsureMode) (*Session, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, open := c.sessions[id]
	opening := c.opening[id]
	switch {
	case !open && opening == nil:
		return nil, nil, nil
	case mode == EnsureCreate:
		return nil, nil, errs.New(session.SessionLocked, fmt.Sprintf(
			"session %q is already open in this session controller; ensure it without mode %q to join it", id, EnsureCreate)).WithReason(ReasonOpenHere)
	case open && !s.Open():
		return nil, nil, errs.New(session.SessionLocked, fmt.Sprintf(
			"session %q is still closing in this session controller (an earlier Close ran out of time); call Close on it again to finish, then ensure it", id)).WithReason(ReasonClosingHere)
	case open:
		return s, nil, nil
	}
	return nil, opening, nil
}

// ensureOpen resumes or creates the session, as o.Mode allows.
func (c *Controller) ensureOpen(ctx stdctx.Context, o EnsureOptions) (*Session, How, error) {
	if o.SessionID == "" || o.Mode == EnsureCreate {
		s, err := c.open(ctx, o.OpenOptions, false)
		return s, HowCreated, err
	}
	s, err := c.open(ctx, o.OpenOptions, true)
	if err == nil {
		return s, HowResumed, nil
	}
	if o.Mode == EnsureExisting || !(errs.HasCode(err, session.NotFound) || errs.HasCode(err, session.NoPersistence)) {
		return nil, "", err
	}
	// Nothing stored under the id: the session starts under it (without
	// persistence it lives in memory until it closes).
	s, err = c.open(ctx, o.OpenOptions, false)
	return s, HowCreated, err
}

// unhold gives up the ownership the open gave its caller and keeps the
// session running until Close: what Ensure promises.
func (s *Session) unhold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepRunning = true
	if s.held {
		s.held = false
		s.owners--
	}
}
