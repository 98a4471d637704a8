package acp_test

import (
	stdctx "context"
	"sync"
	"testing"

	"github.com/coder/acp-go-sdk"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// admitted is the source of the last message admission saw.
var admitted struct {
	mu  sync.Mutex
	src sessions.Source
}

func init() {
	plugin.Register("test.who", "records the source of admitted messages (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			admitted.mu.Lock()
			admitted.src = a.Source
			admitted.mu.Unlock()
			return next.Call(ctx, a)
		})
		return err
	})
}

// TestPromptsNameTheEditorOnBehalfOfTheUser: a prompt's principal is the
// editor, named by initialize's clientInfo, on behalf of the user dsh acp
// runs for.
func TestPromptsNameTheEditorOnBehalfOfTheUser(t *testing.T) {
	me := sessions.Principal{Kind: "user", ID: "ada"}
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: "ok"}}, extra: "  - use: test.who\n", user: me})
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: 1, ClientInfo: &acp.Implementation{Name: "zed", Version: "1"}}); err != nil {
		t.Fatal(err)
	}
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.prompt(r.SessionId, "hi"); err != nil {
		t.Fatal(err)
	}
	admitted.mu.Lock()
	src := admitted.src
	admitted.mu.Unlock()
	if src.Entry != "acp" || src.Principal != (sessions.Principal{Kind: "editor", ID: "zed"}) || src.OnBehalfOf == nil || *src.OnBehalfOf != me {
		t.Fatalf("source %+v (on behalf of %v)", src, src.OnBehalfOf)
	}
}
