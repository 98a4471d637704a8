package mcp

import (
	"errors"
	"net"
	"net/url"

	"github.com/dsh-go/dsh/services/tools"
)

// unreachable is the result of a call whose HTTP request never got an
// answer, or "" when err is something else. A refused or failed dial
// means the call never reached the server; a connection lost after the
// request went out means it may have run.
func (s *server) unreachable(name string, err error) (tools.Result, bool) {
	if s.cfg.URL == "" {
		return tools.Result{}, false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return failed("MCP server %q could not be reached at %s (%v), so %q did not run; check that the server is running at that address. dsh keeps trying to reconnect",
			s.cfg.Name, s.cfg.URL, op.Err, name), true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return failed("MCP server %q could not be reached at %s to finish the call of %q (%v): the connection failed after the call was sent, so it may or may not have taken effect; check that the server is running at that address, then try again",
			s.cfg.Name, s.cfg.URL, name, ue.Err), true
	}
	return tools.Result{}, false
}
