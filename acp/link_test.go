package acp_test

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// acp.session is how the server reaches a session's agent; in a config
// file it has no server to link to, and says so instead of mounting an
// inert policy.
func TestTheSessionPluginIsTheServersOnly(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{"  - use: acp.session\n", "dsh acp mounts it in each editor session's agent by itself"},
		{"  - use: acp.session\n    config: {link: forged}\n", `link "forged" names no editor session of this process`},
	} {
		yaml := "plugins:\n  - use: llm.scripted\n" + tc.entry + "agents:\n  - id: main\n    provider: scripted\n"
		cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
		if err == nil {
			var h *host.Host
			h, err = host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if err == nil {
				h.Close(stdctx.Background())
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.entry, err, tc.want)
		}
		if strings.Contains(tc.entry, "forged") && !errs.Has(err, errs.InvalidArgument, dshacp.ReasonNoLink) {
			t.Errorf("%q: %v; want %s with reason %s among its causes", tc.entry, err, errs.InvalidArgument, dshacp.ReasonNoLink)
		}
	}
}

// An editor that stops reading while the model streams falls behind the
// session's live hub, which drops its stream; the server's stream attaches
// itself again, and the editor still gets the whole answer, once, in
// order, before the prompt's answer.
func TestAnEditorThatFallsBehindGetsTheWholeAnswerOnce(t *testing.T) {
	// Three times the hub's buffer of a client's updates, one per word.
	words := make([]string, 3000)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	answer := strings.Join(words, "")
	replies, _ := json.Marshal([]scripted.Reply{{Text: answer}})
	h, stop := startHost(t, "plugins:\n  - use: llm.scripted\n    config: {replies: "+string(replies)+"}\nagents:\n  - id: main\n    provider: scripted\n")
	defer stop()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- dshacp.Serve(stdctx.Background(), inR, outW, dshacp.Options{Sessions: h.Sessions(), Agent: "main"})
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 0, 1<<20), 1<<22)
	type message struct {
		ID     *int `json:"id"`
		Method string
		Result json.RawMessage
		Params struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct{ Text string }
			}
		}
	}
	// next reads the server's messages up to the answer to request id,
	// returning that answer and the agent's text on the way.
	next := func(id int) (json.RawMessage, string) {
		var text strings.Builder
		for lines.Scan() {
			var m message
			if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
				t.Fatalf("%v: %s", err, lines.Bytes())
			}
			if m.Method == "session/update" && m.Params.Update.SessionUpdate == "agent_message_chunk" {
				text.WriteString(m.Params.Update.Content.Text)
			}
			if m.ID != nil && *m.ID == id && m.Method == "" {
				return m.Result, text.String()
			}
		}
		t.Fatalf("the server ended before answering request %d: %v", id, lines.Err())
		return nil, ""
	}
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`+"\n", t.TempDir())
	res, _ := next(1)
	var opened struct{ SessionID string }
	if err := json.Unmarshal(res, &opened); err != nil || opened.SessionID == "" {
		t.Fatalf("session/new answered %s (%v)", res, err)
	}
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"talk"}]}}`+"\n", opened.SessionID)
	// Nothing is read while the turn runs: the pump is held in its first
	// write, and the hub drops its stream once the buffer is full.
	deadline := time.Now().Add(wait)
	for !slices.ContainsFunc(history(t, h.Sessions(), opened.SessionID), func(e session.Event) bool { return e.Type == session.TurnEnd }) {
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, got := next(2)
	if !strings.Contains(string(res), `"stopReason":"end_turn"`) {
		t.Fatalf("session/prompt answered %s", res)
	}
	if got != answer {
		t.Fatalf("the editor got %d bytes of text; want the %d of the answer, once (got begins %.80q, ends %.80q)", len(got), len(answer), got, got[max(0, len(got)-80):])
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Serve did not return")
	}
}

// A session the service closes under the editor (another client closed
// it, or dsh is stopping) answers the editor's next prompt as closed, as
// it did when the server held the session itself.
func TestAPromptToASessionClosedElsewhereAnswersClosed(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: "hi"}}})
	id := e.newSession()
	if err := e.h.Sessions().Close(e.ctx(), string(id)); err != nil {
		t.Fatal(err)
	}
	_, err := e.prompt(id, "still there?")
	if rpcCode(err) != dshacp.CodeClosed {
		t.Fatalf("prompt: %v; want %d", err, dshacp.CodeClosed)
	}
	if _, err := e.conn.CloseSession(e.ctx(), acp.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("closing it on the connection: %v", err)
	}
}
