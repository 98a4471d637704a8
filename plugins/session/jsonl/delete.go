package jsonl

import (
	stdctx "context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// Delete removes a session's log. It takes the session's lock first,
// without waiting: a session a writer holds — in this process or another —
// is refused with SessionLocked naming the holder, and nothing is
// removed. The log is removed while still locked; a writer that opened it
// just before locks a file no longer in the directory, notices, and
// starts over on a fresh one (see lockLog).
func (w *files) Delete(_ stdctx.Context, sessionID string) error {
	path, err := w.path(sessionID)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return w.notFound(sessionID)
	}
	f, _, err := w.lockLog(sessionID, false)
	if errors.Is(err, errNoLog) {
		return w.notFound(sessionID) // another delete came first
	}
	if err != nil {
		if errs.HasCode(err, session.SessionLocked) {
			return errs.Wrap(session.SessionLocked, err, fmt.Sprintf(
				"cannot delete session %q while it is open", sessionID)).WithReason(errs.ReasonOf(err))
		}
		return err
	}
	defer f.Close()
	if err := w.remove(sessionID, path); err != nil {
		return errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot delete %s; check the directory's permissions", path))
	}
	return nil
}

func (w *files) notFound(sessionID string) error {
	return errs.New(session.NotFound, fmt.Sprintf("session.jsonl: no session %q in %s; `dsh sessions list` shows the stored ones", sessionID, w.dir))
}

// remove unlinks the log of session id, which the caller holds locked,
// and says so in the catalog, carrying the census over (withCensus).
func (w *files) remove(id, path string) error {
	return w.withCensus(func(put func([]byte, bool) error) error {
		if err := os.Remove(path); err != nil {
			return err
		}
		put(encodeEntry(kindGone, session.Summary{ID: id}), false) // the directory says so too
		return nil
	})
}
