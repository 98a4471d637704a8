package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// holder is who holds a session's lock, as written into its lock file. The
// holder empties the file when it lets go, so a record in a file nobody
// locks is the trace of a process that died holding it.
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

// lockRetries bounds how often flock tries again when the lock was busy:
// a listing probes a lock for microseconds, and that must not refuse a
// writer.
const lockRetries = 3

// flock takes the exclusive lock on path, or says who holds it. The lock
// belongs to the open file: it is released when the file is closed or the
// process dies, however it dies, so a killed holder never leaves a stale
// lock. Two opens in one process exclude each other too.
func flock(path, sessionID string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot open the lock file %s of session %q", path, sessionID))
		}
		err = lockFd(f, syscall.LOCK_EX)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h, _ := readHolder(f)
			f.Close()
			if attempt < lockRetries {
				time.Sleep(time.Millisecond)
				continue
			}
			return nil, errs.New(session.SessionLocked, fmt.Sprintf(
				"session %q is in use by %s (lock %s); only one dsh may write a session: stop the other one or pick another session id",
				sessionID, h, path)).WithReason(session.ReasonOtherProcess)
		}
		if err != nil {
			f.Close()
			return nil, errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot lock %s for session %q", path, sessionID))
		}
		// A delete removes the lock file while it holds the lock; whoever
		// opened that file before and locks it after holds a lock nobody
		// else can see, so it starts over on the file now at path.
		if !samePath(f, path) {
			f.Close()
			if attempt < 100 {
				continue
			}
			return nil, errs.New(session.FlushFailed, fmt.Sprintf("session.jsonl: the lock file %s of session %q keeps being replaced; is something deleting the session in a loop?", path, sessionID))
		}
		host, _ := os.Hostname()
		me, _ := json.Marshal(holder{PID: os.Getpid(), Host: host})
		// Who holds the lock is for the error of the next one who asks;
		// failing to say it does not make the lock less held.
		if f.Truncate(0) == nil {
			f.WriteAt(append(me, '\n'), 0)
		}
		return f, nil
	}
}

// unlock empties the holder record and drops the lock.
func unlock(f *os.File) error {
	f.Truncate(0) // a stale record would only cost a listing one probe
	return f.Close()
}

func lockFd(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// samePath reports whether the open file f is still the file at path.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

func readHolder(f *os.File) (holder, int) {
	var h holder
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, 0)
	json.Unmarshal(bytes.TrimSpace(buf[:n]), &h)
	return h, n
}

// probe says whether someone holds the lock at path, without waiting and
// without creating the file. An empty lock file is free: its last holder
// emptied it. A record is checked with a shared lock, taken and dropped at
// once, which fails while a writer holds the lock.
func probe(path string) (held bool, who holder, read int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, holder{}, 0, nil
	}
	if err != nil {
		return false, holder{}, 0, err
	}
	defer f.Close()
	who, read = readHolder(f)
	if read == 0 {
		return false, holder{}, 0, nil
	}
	err = lockFd(f, syscall.LOCK_SH)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, who, read, nil
	}
	if err != nil {
		return false, holder{}, read, err
	}
	return false, holder{}, read, nil // closing f drops the shared lock
}
