package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// holder is who holds a session's lock, as written into its lock file.
type holder struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
}

func (h holder) String() string {
	if h.PID == 0 {
		return "a process that has not yet said who it is"
	}
	return fmt.Sprintf("process %d on host %q", h.PID, h.Host)
}

// flock takes the exclusive lock on path, or says who holds it. The lock
// belongs to the open file: it is released when the file is closed or the
// process dies, however it dies, so a killed holder never leaves a stale
// lock. Two opens in one process exclude each other too.
func flock(path, sessionID string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot open the lock file %s of session %q", path, sessionID))
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		var h holder
		raw, _ := os.ReadFile(path)
		json.Unmarshal(bytes.TrimSpace(raw), &h)
		f.Close()
		return nil, errs.New(session.SessionLocked, fmt.Sprintf(
			"session %q is in use by %s (lock %s); only one dsh may write a session: stop the other one or pick another session id",
			sessionID, h, path)).WithReason(session.ReasonOtherProcess)
	}
	if err != nil {
		f.Close()
		return nil, errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot lock %s for session %q", path, sessionID))
	}
	host, _ := os.Hostname()
	me, _ := json.Marshal(holder{PID: os.Getpid(), Host: host})
	// Who holds the lock is for the error of the next one who asks; failing
	// to say it does not make the lock less held.
	if f.Truncate(0) == nil {
		f.WriteAt(append(me, '\n'), 0)
	}
	return f, nil
}
