package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// writer owns one session's file for this process: it holds the session's
// lock and the events waiting for their checkpoint. It is the session's
// lease, so writes are keyed by the writer that owns the session, never by
// its id: a released writer writes nothing, and the events of an agent that
// is still stopping can never land in the file of the one that follows.
type writer struct {
	files *files
	id    string
	path  string

	// io serializes the writes to the file; never held with mu.
	io sync.Mutex

	// file is the log, locked and open for appending until Release (the
	// same file as lock); fresh says it was created and not yet synced.
	// Both are used with io held.
	file  *os.File
	fresh bool
	// created says Lock created the log: if nothing was written by
	// Release, the empty log goes again, as if the session was never
	// opened.
	created bool

	mu       sync.Mutex
	agent    string   // the id of the agent writing; recorded with event 1
	tenant   string   // the session's tenant; recorded with event 1 too
	lock     *os.File // the locked log; nil once released
	pending  []session.Event
	released bool
	// broken is why this writer could not take the lock; its writes fail
	// with it.
	broken error
}

var _ session.Lease = (*writer)(nil)

func (wr *writer) add(agent, tenant string, e session.Event) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.agent, wr.tenant = agent, tenant
	if wr.released {
		wr.files.log.Error("dropped a session event appended after the session was closed",
			"session", wr.id, "seq", e.Seq, "type", e.Type)
		return
	}
	wr.pending = append(wr.pending, e)
}

// write appends the pending events up to seq to the file and syncs it.
// Events stay pending until they are on disk, so a failed write is retried
// at the next checkpoint.
func (wr *writer) write(seq int64) error {
	wr.io.Lock()
	defer wr.io.Unlock()
	// With io held only appends change pending, so its first n events stay
	// put while they are written.
	wr.mu.Lock()
	if err := wr.unusable(); err != nil {
		wr.mu.Unlock()
		return err
	}
	n := 0
	for n < len(wr.pending) && wr.pending[n].Seq <= seq {
		n++
	}
	batch := wr.pending[:n:n]
	agent, tenant := wr.agent, wr.tenant
	wr.mu.Unlock()
	if n == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // one event per line
	for _, e := range batch {
		var v any = e
		if e.Seq == 1 {
			v = first{e, agent, tenant}
		}
		if err := enc.Encode(v); err != nil {
			return errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: event %d of session %q cannot be written as JSON", e.Seq, wr.id))
		}
	}
	if err := wr.append(buf.Bytes()); err != nil {
		return errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
			"session.jsonl: cannot write %s; %d events of session %q are kept in memory and written at the next checkpoint", wr.path, n, wr.id))
	}
	wr.mu.Lock()
	if !wr.released {
		wr.pending = append([]session.Event(nil), wr.pending[n:]...)
	}
	wr.mu.Unlock()
	return nil
}

// first is how the first event of a log is written: with the agent that
// wrote it, so a listing names the agent from the file's first line. Load
// decodes it as an Event and ignores the field.
type first struct {
	session.Event
	Agent string `json:"agent,omitempty"`
	// Tenant is the tenant the session belongs to: written once, with
	// the log's first event, as the agent is.
	Tenant string `json:"tenant,omitempty"`
}

// unusable says why the writer may not write; the caller holds mu.
func (wr *writer) unusable() error {
	switch {
	case wr.broken != nil:
		return wr.broken
	case wr.released:
		return errs.New(session.SessionLocked, fmt.Sprintf(
			"session.jsonl: the writer of session %q was released; what it still had is not written, so it cannot mix with the next owner's log", wr.id)).WithReason(session.ReasonFenced)
	}
	return nil
}

// Release lets the session go: the lock is dropped and nothing more is
// written through this writer.
func (wr *writer) Release() error {
	wr.io.Lock() // a write in flight finishes while the lock is still held
	defer wr.io.Unlock()
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.released {
		return nil
	}
	wr.released = true
	if n := len(wr.pending); n > 0 && wr.broken == nil {
		wr.files.log.Error("session closed with events that were never written", "session", wr.id, "events", n)
	}
	wr.pending = nil
	wr.files.writers.Forget(wr.id, wr)
	if wr.lock == nil {
		return nil
	}
	if fi, err := wr.lock.Stat(); err == nil && wr.created && fi.Size() == 0 && samePath(wr.lock, wr.path) {
		// Removed while still locked, as Delete does.
		wr.files.remove(wr.id, wr.path)
	} else {
		wr.files.noteClosed(wr.id, wr.path)
	}
	err := wr.lock.Close()
	wr.lock, wr.file = nil, nil
	return err
}

// append writes data at the end of the log and waits for the group
// commit that makes it durable. On any failure it cuts the file back to
// its size before the write, so the events, which stay pending, are
// retried onto a whole file: a partial line or a repeated event in the
// middle would make the session impossible to resume. The caller holds io.
func (wr *writer) append(data []byte) error {
	if !wr.current() {
		// The log was moved or removed behind dsh's back: appending to the
		// old inode would write where nobody reads. The file at the path
		// (a new one if none) is locked before it is written; until then
		// the old one stays locked.
		f, created, err := wr.files.lockLog(wr.id, true)
		if err != nil {
			return err
		}
		wr.mu.Lock()
		wr.lock.Close()
		wr.lock, wr.file, wr.fresh = f, f, unsynced(f, created)
		wr.mu.Unlock()
	}
	return appendTo(wr.file, data, func(f *os.File) error {
		err := wr.files.commit.sync(f, wr.fresh)
		if err == nil {
			wr.fresh = false
		}
		return err
	})
}

// unsynced says whether the directory entry of the log f, just locked,
// may not be durable yet: a log created now, or found empty — left by a
// holder that created it and died before its first write synced the
// entry. Its first write syncs the directory too.
func unsynced(f *os.File, created bool) bool {
	if created {
		return true
	}
	fi, err := f.Stat()
	return err != nil || fi.Size() == 0
}

// current reports whether the open file is still the one at the log's
// path; the caller holds io.
func (wr *writer) current() bool {
	at, err := os.Stat(wr.path)
	if err != nil {
		return false
	}
	open, err := wr.file.Stat()
	return err == nil && os.SameFile(at, open)
}

// appendTo appends data to f and makes it durable with sync; on failure
// it cuts f back to its size before the write.
func appendTo(f *os.File, data []byte, sync func(*os.File) error) (err error) {
	// The size is read each time, not remembered: a resume may have cut
	// a torn last line since the file was opened.
	st, err := f.Stat()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if terr := f.Truncate(st.Size()); terr != nil {
				err = errors.Join(err, fmt.Errorf("cutting the failed write back: %w", terr))
			}
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return sync(f)
}
