// Package jsonl is the session.jsonl plugin: it keeps every agent's session
// log in a file of JSON lines, one event per line, so an agent can resume
// its conversation after dsh restarts.
//
// Events are buffered as they are appended and written at the agent loop's
// session/flush checkpoint (every turn end, and when the agent is
// disposed), followed by an fsync: a turn that ended is on disk before the
// next begins. The plugin is also the sessions service's persistence
// backend, so agents configured with a session id resume from their file.
package jsonl

import (
	"bufio"
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

func init() {
	host.Register(host.Info{
		ID:     "session.jsonl",
		Doc:    "keeps session logs as JSON lines in a directory, so agents can resume",
		Plugin: Plugin, Config: func() any { return &Config{Dir: "sessions"} },
	})
}

// Config is the plugin's configuration.
type Config struct {
	// Dir holds one <session id>.jsonl file per session; it is created if
	// missing. Relative paths start from the working directory.
	Dir string `koanf:"dir" json:"dir"`
}

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("dir is empty; name the directory that holds the session files")
	}
	return nil
}

// Plugin writes the sessions of every agent it hears — all of them on the
// root, one agent's in a preset — and serves them back for resuming.
var Plugin = dshctx.Define("session.jsonl", func(ctx *dshctx.Context, config any) error {
	cfg := Config{Dir: "sessions"}
	if c, ok := config.(*Config); ok && c != nil {
		cfg = *c
	}
	if err := cfg.Validate(); err != nil {
		return errs.New(errs.InvalidArgument, "session.jsonl: "+err.Error())
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("session.jsonl: cannot create the session directory %q", cfg.Dir))
	}
	store, err := session.Key.Get(ctx)
	if err != nil {
		return err
	}
	w := &files{dir: cfg.Dir, log: ctx.Logger(), pending: map[string][]session.Event{}}
	// Only a root instance serves resumes: an agent resumes before its
	// scope, and the presets in it, exist. In a preset it records its agent.
	if ctx.Tag() == "" {
		if err := store.SetBackend(ctx, w); err != nil {
			return err
		}
	}
	if _, err := session.EventAppended.On(ctx, func(_ stdctx.Context, a session.Appended) error {
		w.add(a.Session.ID(), a.Event)
		return nil
	}); err != nil {
		return err
	}
	if _, err := session.EventFlush.On(ctx, func(c stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if err := w.write(f.Session.ID(), f.Seq); err != nil {
			return struct{}{}, err
		}
		return next.Call(c, f)
	}); err != nil {
		return err
	}
	// What a disposal interrupts before its checkpoint still reaches the
	// disk.
	_, err = ctx.OnDispose("write pending session events", w.writeAll)
	return err
}, session.Key)

// files is the plugin's state: events waiting for their checkpoint, by
// session.
type files struct {
	dir string
	log hclog.Logger

	mu      sync.Mutex // guards pending; never held during file I/O
	pending map[string][]session.Event
	// writing serializes the appends to one file; sessions share these
	// few locks by hash, so other sessions' events keep flowing while one
	// file syncs.
	writing [16]sync.Mutex
}

func (w *files) path(sessionID string) (string, error) {
	if !session.ValidID(sessionID) {
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf(
			"session.jsonl: session id %q cannot name a file; use letters, digits, '.', '_' and '-', starting with a letter or digit", sessionID))
	}
	return filepath.Join(w.dir, sessionID+".jsonl"), nil
}

func (w *files) add(sessionID string, e session.Event) {
	w.mu.Lock()
	w.pending[sessionID] = append(w.pending[sessionID], e)
	w.mu.Unlock()
}

// write appends the session's pending events up to seq to its file and
// syncs it. Events stay pending until they are on disk, so a failed write
// is retried at the next checkpoint.
func (w *files) write(sessionID string, seq int64) error {
	h := fnv.New32a()
	h.Write([]byte(sessionID))
	lock := &w.writing[h.Sum32()%uint32(len(w.writing))]
	lock.Lock()
	defer lock.Unlock()

	// With the file's lock held only appends change the pending list, so
	// its first n events stay put while they are written.
	w.mu.Lock()
	events := w.pending[sessionID]
	n := 0
	for n < len(events) && events[n].Seq <= seq {
		n++
	}
	batch := events[:n:n]
	w.mu.Unlock()
	if n == 0 {
		return nil
	}
	path, err := w.path(sessionID)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // one event per line
	for _, e := range batch {
		if err := enc.Encode(e); err != nil {
			return errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: event %d of session %q cannot be written as JSON", e.Seq, sessionID))
		}
	}
	if err := appendSync(path, buf.Bytes()); err != nil {
		return errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot write %s", path))
	}
	w.mu.Lock()
	if rest := w.pending[sessionID][n:]; len(rest) > 0 {
		w.pending[sessionID] = append([]session.Event(nil), rest...)
	} else {
		delete(w.pending, sessionID)
	}
	w.mu.Unlock()
	return nil
}

func appendSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeAll writes every pending event; it runs when the plugin goes away.
func (w *files) writeAll() error {
	w.mu.Lock()
	ids := make([]string, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	var failed []error
	for _, id := range ids {
		if err := w.write(id, 1<<62); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// Load reads a session back for resuming. A last line cut short — dsh
// killed in the middle of a write — is dropped with a warning and cut from
// the file, so the events appended next start on a line of their own: the
// events before it are whole, and the turn it belonged to never completed.
// Any other line that is not an event is an error naming the file and
// line.
func (w *files) Load(_ stdctx.Context, sessionID string) ([]session.Event, error) {
	path, err := w.path(sessionID)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(session.NotFound, fmt.Sprintf("session.jsonl: no session %q in %s", sessionID, w.dir))
	}
	if err != nil {
		return nil, errs.Wrap(session.BadLog, err, fmt.Sprintf("session.jsonl: cannot read %s", path))
	}
	defer f.Close()
	var events []session.Event
	var whole int64 // bytes up to the end of the last whole line
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		raw, err := r.ReadBytes('\n')
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, errs.Wrap(session.BadLog, err, fmt.Sprintf("session.jsonl: cannot read %s", path))
		}
		if err != nil { // the file ends without a newline
			w.log.Warn("dropped a session event cut short by an interrupted write", "file", path, "line", line)
			if terr := os.Truncate(path, whole); terr != nil {
				return nil, errs.Wrap(session.BadLog, terr, fmt.Sprintf("session.jsonl: %s:%d is cut short and cannot be cut from the file", path, line))
			}
			return events, nil
		}
		var e session.Event
		jerr := json.Unmarshal(raw, &e)
		if jerr == nil && e.Seq == 0 {
			jerr = errors.New("it has no seq")
		}
		if jerr != nil {
			return nil, errs.New(session.BadLog, fmt.Sprintf("%s:%d: not a session event: %v; fix or remove the line", path, line, jerr))
		}
		if want := int64(len(events)) + 1; e.Seq != want {
			return nil, errs.New(session.BadLog, fmt.Sprintf(
				"%s:%d: event %d where %d was expected; the file lost or repeats events, and the session cannot be resumed from it", path, line, e.Seq, want))
		}
		events = append(events, e)
		whole += int64(len(raw))
	}
}
