package lsp

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsh-go/dsh/internal/childproc"
	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// stopGrace is how long a server gets to exit after shutdown, after
// SIGTERM and again after SIGKILL.
const stopGrace = time.Second

// client is one running language server and what dsh knows of it: the
// documents it opened there and the diagnostics the server published.
type client struct {
	srv     Server
	root    string
	proc    *childproc.Proc
	conn    jsonrpc2.Conn
	stderr  *tail
	started time.Time

	// sync serialises a document's sync with the wait for its
	// diagnostics, so two calls on one server do not interleave versions.
	sync sync.Mutex

	mu    sync.Mutex
	docs  map[protocol.DocumentURI]*document
	diags map[protocol.DocumentURI]published
	seq   uint64
	// changed is closed and replaced on every publishDiagnostics.
	changed chan struct{}
}

// document is a file open in the server: the version and text it has.
type document struct {
	version int32
	text    string
}

// published is the latest publishDiagnostics for one document; seq orders
// it among all the server sent.
type published struct {
	version int32
	seq     uint64
	list    []protocol.Diagnostic
}

// pipes joins the server's stdout and stdin into the stream jsonrpc2
// reads and writes; closing it closes both, which ends the read loop.
type pipes struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (p pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipes) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipes) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }

// start runs the server's command in root and completes the initialize
// handshake within ctx. path is the command as found on PATH.
func start(ctx stdctx.Context, srv Server, path, root string) (*client, error) {
	p, err := childproc.New(childproc.Spec{
		Path: path, Args: srv.Args, Dir: root,
		Env: srv.Env, Passthrough: srv.EnvPassthrough,
		// Servers are long-lived, and some are wrappers (node scripts)
		// whose children would outlive a SIGKILLed dsh.
		Guard: true,
	})
	if err != nil {
		return nil, err
	}
	c := &client{srv: srv, root: root, proc: p, stderr: &tail{max: 4 << 10}, started: time.Now(),
		docs: map[protocol.DocumentURI]*document{}, diags: map[protocol.DocumentURI]published{}, changed: make(chan struct{})}
	inW, outR, err := p.StartPiped(c.stderr, stopGrace)
	if err != nil {
		return nil, err
	}
	c.conn = jsonrpc2.NewConn(jsonrpc2.NewStream(pipes{r: outR, w: inW}))
	c.conn.Go(stdctx.Background(), c.handle)
	if err := c.initialize(ctx); err != nil {
		c.close()
		if tail := c.stderr.String(); tail != "" {
			err = fmt.Errorf("%w (its stderr ends: %s)", err, tail)
		}
		return nil, err
	}
	return c, nil
}

// initialize is LSP's handshake: initialize, then initialized.
func (c *client) initialize(ctx stdctx.Context) error {
	rootURI := uri.File(c.root)
	params := map[string]any{
		"processId": os.Getpid(),
		"clientInfo": map[string]any{
			"name": "dsh",
		},
		"rootUri":          rootURI,
		"rootPath":         c.root,
		"workspaceFolders": []protocol.WorkspaceFolder{{URI: string(rootURI), Name: filepath.Base(c.root)}},
		"capabilities": map[string]any{
			"textDocument": map[string]any{
				"synchronization":    map[string]any{"didSave": true},
				"publishDiagnostics": map[string]any{"versionSupport": true},
				"hover":              map[string]any{"contentFormat": []string{"markdown", "plaintext"}},
				"definition":         map[string]any{"linkSupport": false},
			},
			"workspace": map[string]any{"workspaceFolders": true, "configuration": true, "symbol": map[string]any{}},
		},
	}
	if c.srv.InitializationOptions != nil {
		params["initializationOptions"] = c.srv.InitializationOptions
	}
	var result json.RawMessage
	if err := c.call(ctx, protocol.MethodInitialize, params, &result); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return c.conn.Notify(ctx, protocol.MethodInitialized, map[string]any{})
}

// call is a request that gives up when ctx ends or the server goes away.
func (c *client) call(ctx stdctx.Context, method string, params, result any) error {
	ctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := c.conn.Call(ctx, method, params, result)
	if err != nil && c.dead() {
		return fmt.Errorf("%s exited during %s (its stderr ends: %s)", c.srv.Name, method, c.stderr.String())
	}
	return err
}

// handle answers what the server asks and keeps what it publishes. It
// runs on the connection's read loop, so it never blocks.
func (c *client) handle(ctx stdctx.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	switch req.Method() {
	case protocol.MethodTextDocumentPublishDiagnostics:
		var p protocol.PublishDiagnosticsParams
		if err := json.Unmarshal(req.Params(), &p); err == nil {
			c.mu.Lock()
			c.seq++
			c.diags[p.URI] = published{version: int32(p.Version), seq: c.seq, list: p.Diagnostics}
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
		return reply(ctx, nil, nil)
	case protocol.MethodWorkspaceConfiguration:
		// No settings of dsh's own: each item gets null, the server's
		// defaults.
		var p protocol.ConfigurationParams
		_ = json.Unmarshal(req.Params(), &p)
		return reply(ctx, make([]any, len(p.Items)), nil)
	case protocol.MethodWorkspaceWorkspaceFolders:
		u := uri.File(c.root)
		return reply(ctx, []protocol.WorkspaceFolder{{URI: string(u), Name: filepath.Base(c.root)}}, nil)
	case protocol.MethodWorkDoneProgressCreate, protocol.MethodClientRegisterCapability, protocol.MethodClientUnregisterCapability:
		return reply(ctx, nil, nil)
	}
	if _, isCall := req.(*jsonrpc2.Call); isCall {
		return jsonrpc2.MethodNotFoundHandler(ctx, reply, req)
	}
	return nil // notifications dsh has no use for: logs, progress
}

// dead reports whether the server is gone.
func (c *client) dead() bool {
	select {
	case <-c.conn.Done():
		return true
	case <-c.proc.Done():
		return true
	default:
		return false
	}
}

// open makes the server see file with text: didOpen the first time,
// didChange (the whole text) when it differs from what the server has.
// It returns the document's version and whether anything was sent.
func (c *client) open(ctx stdctx.Context, file, text string) (protocol.DocumentURI, int32, bool, error) {
	u := uri.File(file)
	c.mu.Lock()
	d := c.docs[u]
	if d != nil && d.text == text {
		v := d.version
		c.mu.Unlock()
		return u, v, false, nil
	}
	if d == nil {
		d = &document{}
		c.docs[u] = d
	}
	d.version++
	d.text = text
	v, first := d.version, d.version == 1
	c.mu.Unlock()
	var err error
	if first {
		err = c.conn.Notify(ctx, protocol.MethodTextDocumentDidOpen, protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
			URI: u, LanguageID: protocol.LanguageIdentifier(c.srv.languageID(file)), Version: v, Text: text}})
	} else {
		// The whole text as the change: every server takes it, and the
		// library's change type would send an empty range with it.
		err = c.conn.Notify(ctx, protocol.MethodTextDocumentDidChange, map[string]any{
			"textDocument":   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: v},
			"contentChanges": []map[string]string{{"text": text}},
		})
	}
	return u, v, true, err
}

// mark is the sequence number of the last publish, so a wait can ask for
// a newer one.
func (c *client) mark() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// diagnostics waits, up to wait, for diagnostics of u published after
// mark for version or later (a server that sends no version counts as
// current), and returns them; ok is false when none came in time.
func (c *client) diagnostics(ctx stdctx.Context, u protocol.DocumentURI, version int32, mark uint64, wait time.Duration) ([]protocol.Diagnostic, bool) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		c.mu.Lock()
		p, has := c.diags[u]
		ch := c.changed
		c.mu.Unlock()
		if has && p.seq > mark && (p.version == 0 || p.version >= version) {
			return p.list, true
		}
		select {
		case <-ch:
		case <-t.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		case <-c.conn.Done():
			return nil, false
		}
	}
}

// latest is what the server last published for u, if anything.
func (c *client) latest(u protocol.DocumentURI) ([]protocol.Diagnostic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.diags[u]
	return p.list, ok
}

// close asks the server to shut down, then tears its group down, bounded.
func (c *client) close() {
	if !c.dead() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), stopGrace)
		if c.call(ctx, protocol.MethodShutdown, nil, nil) == nil {
			_ = c.conn.Notify(ctx, protocol.MethodExit, nil)
		}
		cancel()
	}
	_ = c.conn.Close()
	c.proc.Stop(stopGrace)
	<-c.conn.Done()
}

// tail keeps the last max bytes written to it: a server's stderr, for
// the error that says why it failed.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
