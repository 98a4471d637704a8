package acp_test

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dshacp "github.com/dsh-go/dsh/acp"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// raw is a server driven by hand-written lines, to send what no SDK
// client would.
type raw struct {
	t      *testing.T
	in     *io.PipeWriter
	out    *bufio.Scanner
	served chan error
	h      *host.Host
}

func newRaw(t *testing.T) *raw {
	t.Helper()
	return newRawWith(t, "")
}

// newRawWith is newRaw with extra plugin entries (YAML).
func newRawWith(t *testing.T, extra string) *raw {
	t.Helper()
	store := t.TempDir()
	cfg, err := config.Parse("test.yaml", []byte("plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: "+store+"}\n"+extra+"agents:\n  - id: main\n    provider: scripted\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &raw{t: t, in: inW, out: bufio.NewScanner(outR), served: make(chan error, 1), h: h}
	go func() {
		err := dshacp.Serve(stdctx.Background(), inR, outW, dshacp.Options{Sessions: h.Sessions(), Agent: "main"})
		outW.Close()
		r.served <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		// Updates the test did not read (a turn's last ones) would block
		// the server's writer for ever: read them to the end.
		drained := make(chan struct{})
		go func() {
			for r.out.Scan() {
			}
			close(drained)
		}()
		select {
		case <-r.served:
		case <-time.After(wait):
			t.Error("Serve did not return after stdin closed")
		}
		<-drained
		h.Close(stdctx.Background())
	})
	return r
}

func (r *raw) send(line string) { r.in.Write([]byte(line + "\n")) }

// next reads the next message the server writes.
func (r *raw) next() map[string]any {
	r.t.Helper()
	got := make(chan map[string]any, 1)
	go func() {
		var m map[string]any
		if r.out.Scan() {
			json.Unmarshal(r.out.Bytes(), &m)
		}
		got <- m
	}()
	select {
	case m := <-got:
		if m == nil {
			r.t.Fatal("the server closed its output")
		}
		return m
	case <-time.After(wait):
		r.t.Fatal("no answer")
	}
	return nil
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func TestMalformedMessagesGetJSONRPCErrors(t *testing.T) {
	r := newRaw(t)
	cases := []struct {
		line string
		code float64
		id   any
	}{
		{`this is not json`, -32700, nil},
		{`{"jsonrpc":"2.0","id":1,"method":`, -32700, nil},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, -32600, nil},
		{`{"jsonrpc":"2.0"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":7}`, -32600, float64(7)},
		{`{"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{}}`, -32601, float64(2)},
		{`{"jsonrpc":"2.0","id":3,"method":"_unknown/ext","params":{}}`, -32601, float64(3)},
		{`{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":42}}`, -32602, float64(4)},
		{`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}`, -32002, float64(5)},
		{`{"jsonrpc":"2.0","id":6,"method":"session/set_mode","params":{"sessionId":"nope","modeId":"read-only"}}`, -32002, float64(6)},
		{`{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":"oops"}`, -32602, float64(8)},
	}
	for _, c := range cases {
		r.send(c.line)
		m := r.next()
		if errCode(m) != c.code || m["id"] != c.id {
			t.Fatalf("%s → %v", c.line, m)
		}
	}
	// Notifications of unknown sessions or methods are ignored, and the
	// server still answers.
	r.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}`)
	r.send(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := r.next(); m["id"] != float64(9) || m["result"] == nil {
		t.Fatalf("%v", m)
	}
}

// stdin closed: every session's agent disposed, its session flushed with
// the turn's end, Serve returns nil.
func TestStdinClosedDisposesEverySession(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.newSession()
	if _, err := e.prompt(id, "hello"); err != nil {
		t.Fatal(err)
	}
	id2, err := e.conn.NewSession(e.ctx(), newSessionReq(e.dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{string(id), string(id2.SessionId)} {
		if _, ok := e.h.Agent("main@" + s); ok {
			t.Fatalf("agent of %s still running", s)
		}
	}
	data, err := os.ReadFile(filepath.Join(e.store, string(id)+".jsonl"))
	if err != nil || !strings.Contains(string(data), `"turn/end"`) || !strings.Contains(string(data), "You said: hello") {
		t.Fatalf("session not flushed: %v\n%s", err, data)
	}
}

// A prompt sent again with the same JSON-RPC id (a client retrying) is
// delivered once: its answer is the original turn's.
func TestARetriedPromptIsDeliveredOnce(t *testing.T) {
	r := newRaw(t)
	dir := t.TempDir()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	r.next()
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + dir + `","mcpServers":[]}}`)
	var id string
	for id == "" {
		m := r.next()
		if res, ok := m["result"].(map[string]any); ok {
			id, _ = res["sessionId"].(string)
		}
	}
	prompt := `{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":"` + id + `","prompt":[{"type":"text","text":"once"}]}}`
	for range 2 {
		r.send(prompt)
		for {
			m := r.next()
			if m["id"] == float64(10) {
				res, _ := m["result"].(map[string]any)
				meta, _ := res["_meta"].(map[string]any)
				o, _ := meta["dsh.dev/outcome"].(map[string]any)
				// The retry's answer is the first's, outcome included.
				if res["stopReason"] != "end_turn" || o["outcome"] != "delivered" || o["turn"] != float64(1) {
					t.Fatalf("%v", m)
				}
				break
			}
		}
	}
	n := 0
	for _, ev := range history(t, r.h.Sessions(), r.h.Sessions().Sessions()[0].ID()) {
		if ev.Type == "user/message" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d user messages", n)
	}
}

// A client that stops reading cannot keep dsh from stopping: once stdin
// closes, Serve stops every agent within CloseTimeout.
func TestAClientThatStopsReadingDoesNotHoldShutdown(t *testing.T) {
	h, stop := startHost(t, "plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n")
	defer stop()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- dshacp.Serve(stdctx.Background(), inR, outW, dshacp.Options{Sessions: h.Sessions(), Agent: "main", CloseTimeout: 200 * time.Millisecond})
	}()
	dir := t.TempDir()
	inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + dir + `","mcpServers":[]}}` + "\n"))
	deadline := time.Now().Add(wait)
	for len(h.Sessions().Sessions()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no session opened")
		}
		time.Sleep(time.Millisecond)
	}
	ss := h.Sessions().Sessions()[0]
	agentID := ss.AgentID()
	// A turn whose updates the pump cannot write.
	inW.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + ss.ID() + `","prompt":[{"type":"text","text":"hi"}]}}` + "\n"))
	for len(history(t, h.Sessions(), ss.ID())) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the turn did not run")
		}
		time.Sleep(time.Millisecond)
	}
	ictx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
	defer cancel()
	h.Sessions().Idle(ictx, ss.ID())
	inW.Close()
	select {
	case <-served:
	case <-time.After(wait):
		t.Fatal("Serve did not return")
	}
	if _, ok := h.Agent(agentID); ok {
		t.Fatal("the agent outlived the connection")
	}
	// Let the writes held in the pipe go, so nothing leaks.
	go io.Copy(io.Discard, outR)
	outW.Close()
}
