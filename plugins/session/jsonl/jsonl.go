// Package jsonl is the session.jsonl plugin: it keeps every agent's session
// log in a file of JSON lines, one event per line, so an agent can resume
// its conversation after dsh restarts.
//
// Events are buffered as they are appended and written at the agent loop's
// session/flush checkpoints (the prompt, each tool call's start, each
// step's end, the turn's end, and when the agent is disposed), then
// synced: a step that ended is on disk before the next begins. The syncs
// of all the directory's sessions are shared (group commit, commit.go).
// The plugin is also the session log's persistence backend, so agents
// configured with a session id resume from their file.
//
// The directory holds <id>.jsonl (the log; its first line also names the
// agent that wrote it, and its flock is the session's lock, taken by its
// one writer) and .catalog, a summary of each session its writers append
// when they take it (naming the holder) and let it go (catalog.go). The
// backend lists sessions (session.Lister, session.PageLister) from the
// catalog, and from a log's head and tail only where the catalog cannot
// vouch for it, finds one by its id from its own log (session.Finder),
// and deletes them (session.Deleter) under
// the session's lock.
package jsonl

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// Config is the plugin's configuration.
type Config struct {
	// Dir holds one <session id>.jsonl file per session; it is created if
	// missing. Relative paths start from the working directory.
	Dir string `koanf:"dir" json:"dir"`
	// Sync is how checkpoints reach the disk: "group" (default) shares one
	// sync among the sessions that wrote meanwhile, a syncfs(2) of the
	// file system for more than one; "file" syncs each session's file on
	// its own, for a dir on a file system that other programs write
	// heavily, whose dirty data a syncfs would write back too.
	Sync string `koanf:"sync" json:"sync,omitempty"`
}

// Defaults keeps sessions in ./sessions unless the entry says otherwise.
func (Config) Defaults() Config { return Config{Dir: "sessions", Sync: SyncGroup} }

// The values of Config.Sync.
const (
	SyncGroup = "group"
	SyncFile  = "file"
)

// AttachmentsDir is where the attachments of these sessions are kept:
// beside the session files (services/attachments), so a session and the
// images it references move and are backed up together.
func (c Config) AttachmentsDir() string { return filepath.Join(c.Dir, "attachments") }

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("dir is empty; name the directory that holds the session files")
	}
	if c.Sync != "" && c.Sync != SyncGroup && c.Sync != SyncFile {
		return fmt.Errorf("sync is %q; use %q (share syncs among sessions) or %q (sync each file alone)", c.Sync, SyncGroup, SyncFile)
	}
	return nil
}

// Plugin writes the sessions of every agent it hears — all of them on the
// root, one agent's in a preset — and serves them back for resuming.
var Plugin = plugin.Register("session.jsonl", "keeps session logs as JSON lines in a directory, so agents can resume", func(ctx *dshctx.Context, cfg Config) error {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("session.jsonl: cannot create the session directory %q", cfg.Dir))
	}
	store, err := session.Key.Get(ctx)
	if err != nil {
		return err
	}
	w := &files{dir: cfg.Dir, log: ctx.Logger(), commit: newCommitter(cfg.Sync == SyncFile)}
	// Only a root instance serves resumes: an agent resumes before its
	// scope, and the presets in it, exist. In a preset it records its
	// agent, taking the session's lock when it first hears of it.
	if ctx.Tag() == "" {
		if err := store.SetBackend(ctx, w); err != nil {
			return err
		}
	}
	if _, err := session.EventAppended.On(ctx, func(_ stdctx.Context, a session.Appended) error {
		w.writerFor(a.Session).add(a.Session.AgentID(), a.Session.Tenant(), a.Event)
		return nil
	}); err != nil {
		return err
	}
	if _, err := session.EventFlush.On(ctx, func(c stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if err := w.writerFor(f.Session).write(f.Seq); err != nil {
			return struct{}{}, err
		}
		return next.Call(c, f)
	}); err != nil {
		return err
	}
	// What a disposal interrupts before its checkpoint still reaches the
	// disk; then every lock this plugin holds is let go.
	_, err = ctx.OnDispose("write pending session events", w.close)
	return err
}, session.Key).StoresSessions()

// files is the plugin's state: the writers of the sessions it holds.
type files struct {
	dir string
	log hclog.Logger
	// commit syncs the appends of every session of dir in groups.
	commit *committer

	// writers are the sessions this plugin holds, and those it adopted
	// (opened without its lease; they lock on first use).
	writers session.Writers[*writer]

	// logReads counts the logs catalog listings read, for the tests.
	logReads atomic.Int64
	// dirReads counts the reads of the directory's names, for the tests:
	// a Find, and a listing the census spares (table.go), make none.
	dirReads atomic.Int64
	// censusMargin, when set, replaces the constant, for the tests.
	censusMargin time.Duration
}

var _ session.StoredLocker = (*files)(nil)

func (w *files) path(sessionID string) (string, error) {
	if !session.ValidID(sessionID) {
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf(
			"session.jsonl: session id %q cannot name a file; use letters, digits, '.', '_' and '-', starting with a letter or digit", sessionID))
	}
	return filepath.Join(w.dir, sessionID+".jsonl"), nil
}

// Lock takes session id for this process: the flock on its log, created
// if missing; its open line in the catalog names this process and host
// for whoever is refused.
func (w *files) Lock(_ stdctx.Context, sessionID string) (session.Lease, error) {
	wr, err := w.lock(sessionID, true)
	if err != nil {
		return nil, err
	}
	return wr, nil
}

// LockStored takes a stored session for a resume: it creates no log, so
// resuming an id never stored is NotFound, not an empty session.
func (w *files) LockStored(_ stdctx.Context, sessionID string) (session.Lease, error) {
	wr, err := w.lock(sessionID, false)
	if err != nil {
		return nil, err
	}
	return wr, nil
}

func (w *files) lock(sessionID string, create bool) (*writer, error) {
	path, err := w.path(sessionID)
	if err != nil {
		return nil, err
	}
	f, created, err := w.lockLog(sessionID, create)
	if errors.Is(err, errNoLog) {
		return nil, w.notFound(sessionID)
	}
	if err != nil {
		return nil, err
	}
	// Before the log can change, listings must stop trusting the catalog
	// about it (a log just created has its open line).
	if !created {
		if err := w.noteOpen(sessionID); err != nil {
			f.Close()
			return nil, err
		}
	}
	wr := &writer{files: w, id: sessionID, path: path, lock: f, file: f, fresh: unsynced(f, created), created: created}
	w.writers.Hold(sessionID, wr)
	return wr, nil
}

// writerFor returns the writer that owns s.
func (w *files) writerFor(s *session.Session) *writer {
	if wr, ok := s.Lease().(*writer); ok && wr.files == w {
		return wr
	}
	return w.writers.Adopt(s, func() *writer {
		wr, err := w.lock(s.ID(), true)
		if err != nil {
			w.log.Error("cannot write this session", "session", s.ID(), "error", err)
			wr = &writer{files: w, id: s.ID(), broken: err}
		}
		return wr
	})
}

// close writes every pending event and releases every writer; it runs when
// the plugin goes away.
func (w *files) close() error {
	var failed []error
	for _, wr := range w.writers.All() {
		wr.mu.Lock()
		broken := wr.broken != nil || wr.released
		wr.mu.Unlock()
		if !broken {
			if err := wr.write(1 << 62); err != nil {
				failed = append(failed, err)
			}
		}
		wr.Release()
	}
	return errors.Join(failed...)
}

// Load reads a session back for resuming. A last line cut short — dsh
// killed in the middle of a write — is dropped with a warning and cut from
// the file, so the events appended next start on a line of their own: the
// events before it are whole, and the turn it belonged to never completed.
// The file is cut only by the process that holds the session; a reader
// that does not just skips the line, which its writer may be finishing.
// Any other line that is not an event, or an event of a type this version
// does not know, is an error naming the file and line.
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
			if !w.writers.Holds(sessionID) {
				return events, nil
			}
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
		if !e.Type.Known() {
			return nil, errs.New(session.BadLog, fmt.Sprintf(
				"%s:%d: unknown event type %q; it was written by another version of dsh or edited by hand, and skipping it could drop a message", path, line, e.Type))
		}
		if want := int64(len(events)) + 1; e.Seq != want {
			return nil, errs.New(session.BadLog, fmt.Sprintf(
				"%s:%d: event %d where %d was expected; the file lost or repeats events, and the session cannot be resumed from it", path, line, e.Seq, want))
		}
		events = append(events, e)
		whole += int64(len(raw))
	}
}
