package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// A session's lock is the flock on its log: one file and one descriptor
// per open session, which the writer also appends through. Who holds it
// is said by the holder's open line in the catalog (catalog.go), which it
// appends once it holds the lock; a refusal, or a listing that finds a
// log held, reads that line back. Logs are never renamed and Delete
// unlinks a log while holding its lock, so whoever opened the log before
// the unlink and locks it after sees it is no longer the file at its path
// and starts over.

// holder is who holds a session's lock.
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

// me is this process as a holder.
func me() holder {
	host, _ := os.Hostname()
	return holder{PID: os.Getpid(), Host: host}
}

// encode is the holder as the title column of an open line: "pid host".
func (h holder) encode() string { return strconv.Itoa(h.PID) + " " + h.Host }

func decodeHolder(s string) holder {
	pid, host, _ := strings.Cut(s, " ")
	n, err := strconv.Atoi(pid)
	if err != nil {
		return holder{}
	}
	return holder{PID: n, Host: host}
}

// lockRetries bounds how often lockLog tries again when the lock was busy:
// a listing probes a lock for microseconds, and that must not refuse a
// writer.
const lockRetries = 3

// errNoLog is lockLog's answer for a log that does not exist when it may
// not create it.
var errNoLog = errors.New("no log")

// lockLog takes the exclusive lock on the log of session id, creating the
// log when create is set (created says it did, and that its open line is
// written), or says who holds it. The lock belongs to the open file: it
// is released when the file is closed or the process dies, however it
// dies, so a killed holder never leaves a stale lock. Two opens in one
// process exclude each other too.
func (w *files) lockLog(id string, create bool) (f *os.File, created bool, err error) {
	path := filepath.Join(w.dir, id+".jsonl")
	for attempt := 0; ; attempt++ {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
		if errors.Is(err, fs.ErrNotExist) && create {
			f, err = w.createLog(id, path)
			if (errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.EWOULDBLOCK)) && attempt < 100 {
				continue // another locker came first: refused next round, or it let go
			}
			if err == nil {
				if err := w.legacyLock(id); err != nil {
					os.Remove(path)
					f.Close()
					return nil, false, err
				}
				return f, true, nil
			}
		}
		if errors.Is(err, fs.ErrNotExist) && !create {
			return nil, false, errNoLog
		}
		if err != nil {
			return nil, false, errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot open the log %s of session %q", path, id))
		}
		err = lockFd(f, syscall.LOCK_EX)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			if attempt < lockRetries {
				time.Sleep(time.Millisecond)
				continue
			}
			return nil, false, w.locked(id, path, w.holderOf(id))
		}
		if err != nil {
			f.Close()
			return nil, false, errs.Wrap(session.FlushFailed, err, fmt.Sprintf("session.jsonl: cannot lock %s for session %q", path, id))
		}
		// A delete unlinked the log while it held the lock; whoever opened
		// that file before and locks it after holds a lock nobody else can
		// see, so it starts over on the file now at path.
		if !samePath(f, path) {
			f.Close()
			if attempt < 100 {
				continue
			}
			return nil, false, errs.New(session.FlushFailed, fmt.Sprintf("session.jsonl: the log %s of session %q keeps being replaced; is something deleting the session in a loop?", path, id))
		}
		if err := w.legacyLock(id); err != nil {
			f.Close()
			return nil, false, err
		}
		return f, false, nil
	}
}

// createLog creates the log of session id, locked, and writes its open
// line, carrying the census over the new name (withCensus).
func (w *files) createLog(id, path string) (*os.File, error) {
	var f *os.File
	err := w.withCensus(func(put func([]byte, bool) error) error {
		nf, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		// Someone who opened it between its creation and now may hold it:
		// then it is theirs.
		if err := lockFd(nf, syscall.LOCK_EX); err != nil {
			nf.Close()
			return err
		}
		if err := put(encodeEntry(kindOpen, session.Summary{ID: id, Title: me().encode()}), true); err != nil {
			os.Remove(path)
			nf.Close()
			return errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
				"session.jsonl: cannot mark session %q open in the catalog %s; check the directory's permissions and free space",
				id, filepath.Join(w.dir, catalogName)))
		}
		f = nf
		return nil
	})
	if err != nil && f != nil {
		f.Close()
		f = nil
	}
	return f, err
}

func (w *files) locked(id, path string, h holder) error {
	return errs.New(session.SessionLocked, fmt.Sprintf(
		"session %q is in use by %s (lock %s); only one dsh may write a session: stop the other one or pick another session id",
		id, h, path)).WithReason(session.ReasonOtherProcess)
}

// legacyLock deals with the <id>.lock file a dsh before this version
// locked: held, that dsh still writes the session, so it is refused with
// the holder the file names; free, it is debris and removed. A dsh of the
// old version started later does not see the log's lock: stop older dsh
// processes before upgrading (docs/sessions.md).
func (w *files) legacyLock(id string) error {
	path := filepath.Join(w.dir, id+".lock")
	f, err := os.Open(path)
	if err != nil {
		return nil // none: the common case, one failed open
	}
	defer f.Close()
	err = lockFd(f, syscall.LOCK_SH)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		var h holder
		buf := make([]byte, 256)
		n, _ := f.ReadAt(buf, 0)
		json.Unmarshal(bytes.TrimSpace(buf[:n]), &h)
		return w.locked(id, path, h)
	}
	os.Remove(path)
	return nil
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

// held says whether a writer holds the lock of the log open as f, by
// taking a shared lock without waiting and dropping it at once.
func held(f *os.File) (bool, error) {
	err := lockFd(f, syscall.LOCK_SH)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, lockFd(f, syscall.LOCK_UN)
}

// holderOf reads who holds session id from the last catalog line of id,
// scanning the catalog backwards: the line a holder appended when it took
// the lock is near the end, unless a compaction kept it for long. The
// zero holder when that line is not an open line (the holder has not yet
// written it).
func (w *files) holderOf(id string) holder {
	if e, ok := lastLineOf(filepath.Join(w.dir, catalogName), id); ok && e.kind == kindOpen {
		return decodeHolder(e.title())
	}
	return holder{}
}

// lastLineOf returns the last whole, intact catalog line of id in the
// catalog at path, reading it backwards in 64 KiB steps.
func lastLineOf(path, id string) (entry, bool) {
	f, err := os.Open(path)
	if err != nil {
		return entry{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return entry{}, false
	}
	const step = 64 << 10
	agents := map[string]string{}
	end := fi.Size()
	var carry []byte // the start of a line whose rest is later in the file
	for first := true; end > 0 || len(carry) > 0; first = false {
		start := max(0, end-step)
		buf := make([]byte, int(end-start), int(end-start)+len(carry))
		if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return entry{}, false
		}
		buf = append(buf, carry...)
		if first {
			// A last line without its newline is being appended.
			buf = buf[:bytes.LastIndexByte(buf, '\n')+1]
		}
		for len(buf) > 0 {
			nl := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
			if nl < 0 && start > 0 {
				break // the line starts in the previous step
			}
			line := bytes.TrimSuffix(buf[nl+1:], []byte{'\n'})
			if e, ok := parseEntry(line, agents); ok && e.id == id {
				e.id = id // not the buffer's
				return e, true
			}
			buf = buf[:nl+1]
		}
		carry = bytes.Clone(buf)
		end = start
		if start == 0 {
			break
		}
	}
	return entry{}, false
}
