package jsonl

import (
	stdctx "context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// Delete removes a session's log and lock file. It takes the session's
// lock first, without waiting: a session a writer holds — in this process
// or another — is refused with SessionLocked naming the holder, and nothing
// is removed. The lock file is removed while still locked; a writer that
// opened it just before locks a file no longer in the directory, notices,
// and starts over on a fresh one (see flock).
func (w *files) Delete(_ stdctx.Context, sessionID string) error {
	path, err := w.path(sessionID)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return w.notFound(sessionID)
	}
	lockPath := filepath.Join(w.dir, sessionID+".lock")
	f, err := flock(lockPath, sessionID)
	if err != nil {
		if errs.HasCode(err, session.SessionLocked) {
			return errs.Wrap(session.SessionLocked, err, fmt.Sprintf(
				"cannot delete session %q while it is open", sessionID)).WithReason(errs.ReasonOf(err))
		}
		return err
	}
	rerr := os.Remove(path)
	if rerr == nil {
		w.noteGone(sessionID)
	}
	if lerr := os.Remove(lockPath); lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		w.log.Warn("deleted a session but not its lock file", "file", lockPath, "error", lerr)
	}
	f.Close()
	switch {
	case errors.Is(rerr, fs.ErrNotExist): // another delete came first
		return w.notFound(sessionID)
	case rerr != nil:
		return errs.Wrap(session.FlushFailed, rerr, fmt.Sprintf("session.jsonl: cannot delete %s; check the directory's permissions", path))
	}
	return nil
}

func (w *files) notFound(sessionID string) error {
	return errs.New(session.NotFound, fmt.Sprintf("session.jsonl: no session %q in %s; `dsh sessions list` shows the stored ones", sessionID, w.dir))
}
