package mcp

import (
	stdctx "context"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/waterfall"
)

// maxInstructions bounds what one server's instructions add to every
// system prompt: a server is not the operator, and a runaway text would
// cost each request its length.
const maxInstructions = 8 << 10

// noteInstructions keeps what the server said at the handshake about how
// to use it. Claude Code puts these instructions in the system prompt; a
// client that drops them leaves the model without the server's own
// guidance (which tool first, which arguments), so dsh does the same.
// They are kept while the server is down, as its tools are.
func (s *server) noteInstructions(c *conn) {
	r := c.sess.InitializeResult()
	if r == nil {
		return
	}
	text := strings.TrimSpace(r.Instructions)
	if len(text) > maxInstructions {
		s.log.Warn(fmt.Sprintf("the MCP server's instructions are %d bytes; the first %d go into the system prompt", len(text), maxInstructions))
		text = strings.ToValidUTF8(text[:maxInstructions], "") + "\n[... cut by dsh]"
	}
	s.mu.Lock()
	s.instructions = text
	s.mu.Unlock()
}

// assemble adds the server's instructions to the system prompt of the
// agents that have its tools (the entry's scope).
func (s *server) assemble(ctx stdctx.Context, a systemprompt.Assembly, next waterfall.Next[systemprompt.Assembly, string]) (string, error) {
	text, err := next.Call(ctx, a)
	if err != nil {
		return text, err
	}
	s.mu.Lock()
	ins := s.instructions
	s.mu.Unlock()
	if ins == "" {
		return text, nil
	}
	block := fmt.Sprintf("Instructions from the MCP server %q, whose tools are named %s__<tool>:\n%s", s.cfg.Name, s.cfg.Name, ins)
	if text == "" {
		return block, nil
	}
	return text + "\n\n" + block, nil
}
