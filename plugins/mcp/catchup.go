package mcp

import (
	stdctx "context"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// catchUp brings the registry in step with the server's list before a
// call's result goes back to the agent loop, whose next model request is
// built from the registry. The list_changed notification cannot be waited
// for: a server may send it after the call's answer (the Go SDK's server
// sends it some milliseconds later, to batch changes), so the model would
// be offered the old list, a removed tool included. So the list is asked
// for after each call that may have changed it: of a tool without
// readOnlyHint (a read-only tool "does not modify its environment"), or
// of any tool once a notification is pending. A server that does not
// announce list changes (capabilities.tools.listChanged) is not asked.
// One tools/list costs about what the call did (the SDK decodes each
// tool's schema), which is why read-only calls, the common kind, skip it.
func (s *server) catchUp(ctx stdctx.Context, c *conn, readOnly bool) {
	if (readOnly && len(s.changed) == 0) || !announcesChanges(c.sess) || s.gone(c) {
		return
	}
	lctx, cancel := stdctx.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	if err := s.sync(lctx, c); err != nil && ctx.Err() == nil {
		s.log.Warn("could not list the MCP server's tools after a call; the list is brought up to date on its next notification", "error", err)
	}
}

// announcesChanges says whether the server said it sends
// notifications/tools/list_changed.
func announcesChanges(sess *mcpsdk.ClientSession) bool {
	r := sess.InitializeResult()
	return r != nil && r.Capabilities != nil && r.Capabilities.Tools != nil && r.Capabilities.Tools.ListChanged
}
