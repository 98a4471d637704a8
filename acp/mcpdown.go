package acp

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// A session opens without an editor's MCP server that does not start, and
// the editor is told which and why: this file finds the server in the
// open's error and words the report.

// mcpUnavailable is the mcp plugin's code for a server that did not start
// (plugins/mcp.Unavailable; acp does not import the plugin, which a dsh
// binary may leave out). Its details name the server.
const mcpUnavailable errs.Code = "MCP_SERVER_UNAVAILABLE"

// failedServer is the editor's server an open failed on, when it failed
// on one of them: its index in servers and why it failed.
func failedServer(err error, servers []mcpServer) (int, string, bool) {
	e := findCode(err, mcpUnavailable)
	if e == nil {
		return 0, "", false
	}
	name, _ := e.Details["server"].(string)
	for i, srv := range servers {
		if srv.Name == name {
			why := e.Error()
			if e.Cause != nil {
				why = e.Cause.Error()
			}
			return i, why, true
		}
	}
	return 0, "", false
}

// findCode is the first *errs.Error with code in err's tree, joined errors
// included; nil when there is none.
func findCode(err error, code errs.Code) *errs.Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*errs.Error); ok && e.Code == code {
		return e
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			if e := findCode(c, code); e != nil {
				return e
			}
		}
	case interface{ Unwrap() error }:
		return findCode(u.Unwrap(), code)
	}
	return nil
}

// unavailable is an editor's MCP server a session opened without.
type unavailable struct {
	Label, Name, Why string
}

// unavailableText is what the editor shows of the servers a session
// opened without.
func unavailableText(down []unavailable) string {
	var b strings.Builder
	for _, u := range down {
		fmt.Fprintf(&b, "dsh: the MCP server %q did not start, so this session runs without its tools: %s. "+
			"Fix the server in the editor's settings (its command, url or headers), then open a new session.\n", u.Label, u.Why)
	}
	return b.String()
}

// MetaMCPUnavailable is the _meta key of a session/new, /load or /resume
// answer that lists the editor's MCP servers the session opened without:
// [{name, error}], name as the editor sent it.
const MetaMCPUnavailable = "dsh.dev/mcpUnavailable"

// reportDown tells the editor which of its MCP servers the session opened
// without: as agent text, which every editor shows, and in the answer's
// _meta (downMeta) for one that reads it.
func (st *conv) reportDown() {
	if len(st.down) > 0 {
		st.sendText(kindMessage, unavailableText(st.down))
	}
}

// downMeta is the answer's _meta naming the servers down; nil for none.
func (st *conv) downMeta() map[string]any {
	if len(st.down) == 0 {
		return nil
	}
	list := make([]map[string]any, len(st.down))
	for i, u := range st.down {
		list[i] = map[string]any{"name": u.Label, "error": u.Why}
	}
	return map[string]any{MetaMCPUnavailable: list}
}
