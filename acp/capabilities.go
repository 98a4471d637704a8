package acp

import (
	stdctx "context"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// probeWait bounds the look at the session store that decides what
// initialize advertises.
const probeWait = 5 * time.Second

// stored says what of the session store works on the loaded config: load
// and resume need a persistence backend, list one that can list. An
// editor offered session/load on a config without a store would get
// SESSION_NO_PERSISTENCE for each call, so what does not work is not
// advertised. The store is asked, not the config: a cluster's backend or
// a plugin binary's counts as much as session.jsonl.
func (s *Server) stored(ctx stdctx.Context) (resume, list bool) {
	ctx, cancel := stdctx.WithTimeout(ctx, probeWait)
	defer cancel()
	// One session is enough to tell: the store need not describe them all.
	_, err := s.opts.Sessions.ListPage(ctx, session.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return true, true
	case errs.HasCode(err, session.Unsupported):
		return true, false
	case errs.HasCode(err, session.NoPersistence):
		return false, false
	}
	// The store is there but failed to answer: offer what it is for, so
	// the failure shows where the editor uses it, with its own message.
	s.log.Warn("the session store did not answer the capability probe; session/load, /list and /resume are advertised anyway", "error", err)
	return true, true
}

// sessionCapabilities is what initialize advertises of sessions.
func (s *Server) sessionCapabilities(ctx stdctx.Context) (load bool, c acp.SessionCapabilities) {
	resume, list := s.stored(ctx)
	c.Close = &acp.SessionCloseCapabilities{}
	if resume {
		c.Resume = &acp.SessionResumeCapabilities{}
	}
	if list {
		c.List = &acp.SessionListCapabilities{}
	}
	return resume, c
}
