package acp

import (
	stdctx "context"
	"fmt"
	"strings"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// NewSession opens a session whose agent works in cwd.
func (s *Server) NewSession(ctx stdctx.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	st, err := s.open(ctx, openNew, "", p.Cwd, p.McpServers)
	if err != nil {
		return acp.NewSessionResponse{}, rpcErr(err)
	}
	st.announce()
	st.reportDown()
	s.reportRoots(st, p.AdditionalDirectories)
	st.planModeAtOpen(ctx)
	return acp.NewSessionResponse{SessionId: st.id, Modes: st.modes(), Meta: st.downMeta()}, nil
}

// LoadSession resumes a stored session and replays its history as
// session/update notifications before it answers.
func (s *Server) LoadSession(ctx stdctx.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	st, err := s.open(ctx, openLoad, p.SessionId, p.Cwd, p.McpServers)
	if err != nil {
		return acp.LoadSessionResponse{}, rpcErr(err)
	}
	st.waitForwarded(st.replayTo)
	st.announce()
	st.reportDown()
	s.reportRoots(st, p.AdditionalDirectories)
	st.planModeAtOpen(ctx)
	return acp.LoadSessionResponse{Modes: st.modes(), Meta: st.downMeta()}, nil
}

// ResumeSession resumes a stored session without replaying it.
func (s *Server) ResumeSession(ctx stdctx.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	st, err := s.open(ctx, openResume, p.SessionId, p.Cwd, p.McpServers)
	if err != nil {
		return acp.ResumeSessionResponse{}, rpcErr(err)
	}
	st.announce()
	st.reportDown()
	s.reportRoots(st, p.AdditionalDirectories)
	st.planModeAtOpen(ctx)
	return acp.ResumeSessionResponse{Modes: st.modes(), Meta: st.downMeta()}, nil
}

// CloseSession closes exactly that session: its agent is disposed. A
// session whose close failed (its agent did not stop in time) stays known,
// so the client can close it again; it leaves once a close succeeds.
func (s *Server) CloseSession(ctx stdctx.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	st, err := s.get(p.SessionId)
	if err != nil {
		return acp.CloseSessionResponse{}, rpcErr(err)
	}
	cctx, cancel := stdctx.WithTimeout(stdctx.WithoutCancel(ctx), s.opts.CloseTimeout)
	defer cancel()
	if err := st.close(cctx); err != nil {
		return acp.CloseSessionResponse{}, rpcErr(err)
	}
	s.mu.Lock()
	if s.sessions[p.SessionId] == st {
		delete(s.sessions, p.SessionId)
	}
	s.mu.Unlock()
	return acp.CloseSessionResponse{}, nil
}

// ListSessions lists one page of the stored sessions, most recent first:
// Options.ListPageSize of them, and a nextCursor when more follow, which
// the next request passes back as its cursor. dsh keeps no cwd with a
// session, so cwd filters nothing and each entry's cwd is empty.
func (s *Server) ListSessions(ctx stdctx.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	opts := session.ListOptions{Limit: s.opts.ListPageSize}
	if p.Cursor != nil {
		opts.Cursor = *p.Cursor
	}
	page, err := s.opts.Sessions.ListPage(ctx, opts)
	if err != nil {
		return acp.ListSessionsResponse{}, rpcErr(err)
	}
	out := acp.ListSessionsResponse{Sessions: []acp.SessionInfo{}}
	if page.Next != "" {
		out.NextCursor = acp.Ptr(page.Next)
	}
	for _, sum := range page.Sessions {
		info := acp.SessionInfo{SessionId: acp.SessionId(sum.ID)}
		if sum.Title != "" {
			info.Title = acp.Ptr(sum.Title)
		}
		if !sum.Updated.IsZero() {
			info.UpdatedAt = acp.Ptr(sum.Updated.UTC().Format(time.RFC3339))
		}
		info.Meta = map[string]any{"state": string(sum.State), "agent": sum.Agent}
		out.Sessions = append(out.Sessions, info)
	}
	return out, nil
}

// Cancel ends the session's turn and drops what it queued; every prompt
// waiting then answers cancelled.
func (s *Server) Cancel(_ stdctx.Context, p acp.CancelNotification) error {
	st, err := s.get(p.SessionId)
	if err != nil {
		s.log.Warn("session/cancel of an unknown session", "session", p.SessionId)
		return nil
	}
	// Notifications are handled one at a time: the wait for the agent to
	// go idle must not hold the ones behind it.
	st.spawn(st.cancelTurn)
	return nil
}

var _ = errs.Internal

// reportRoots tells the editor that the additional workspace roots it sent
// are not used: initialize does not advertise additionalDirectories, and
// the session's tools stay confined to its cwd. The session opens all the
// same; a client that sent them regardless of the capability would
// otherwise believe the agent can reach them.
func (s *Server) reportRoots(st *conv, roots []string) {
	if len(roots) == 0 {
		return
	}
	s.log.Warn("the client's additional directories are not used: the session is confined to its cwd", "session", st.id, "directories", roots)
	st.sendText(kindMessage, fmt.Sprintf("dsh: this session works in %s only; the additional directories %s are not part of it (dsh does not take additionalDirectories, and initialize did not offer them). Open a session in a folder that holds them all to work on them together.\n",
		st.cwd, strings.Join(roots, ", ")))
}
