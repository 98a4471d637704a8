package attachments

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// disk is the backend of a store in a directory:
//
//	blobs/<hex>            the bytes, written once (temp file, fsync, rename)
//	refs/<hex>/<session>   one marker per referencing session; "ok" inside
//	                       once the session's log was seen to hold the ref
//	lock                   flocked while markers or blobs change
type disk struct {
	dir string
}

// tmpPrefix starts the names of blobs being written; sweep removes old ones.
const tmpPrefix = ".tmp-"

// staleTemp is how old a temp file must be before sweep takes it for the
// trace of a crashed write rather than one in progress in another process.
const staleTemp = time.Hour

func openDisk(dir string) (*disk, error) {
	for _, d := range []string{dir, filepath.Join(dir, "blobs"), filepath.Join(dir, "refs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, errs.Wrap(StoreFailed, err, fmt.Sprintf("attachments: cannot create the store directory %s; check its permissions or configure another dir", d))
		}
	}
	return &disk{dir: dir}, nil
}

func (d *disk) failed(err error, what string) error {
	return errs.Wrap(StoreFailed, err, fmt.Sprintf("attachments: cannot %s in %s; check the directory's permissions and free space", what, d.dir))
}

func (d *disk) Lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(d.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, d.failed(err, "open the lock file")
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, d.failed(err, "lock the store")
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func (d *disk) blobPath(hex string) string { return filepath.Join(d.dir, "blobs", hex) }

func (d *disk) WriteBlob(hex string, data []byte) (int64, error) {
	path := d.blobPath(hex)
	if _, err := os.Lstat(path); err == nil {
		return 0, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), tmpPrefix+"*")
	if err != nil {
		return 0, d.failed(err, "create a blob")
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, d.failed(err, "write blob sha256:"+hex)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return 0, d.failed(err, "sync the blob directory")
	}
	return int64(len(data)), nil
}

func (d *disk) ReadBlob(hex string) ([]byte, error) {
	b, err := os.ReadFile(d.blobPath(hex))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(NotFound, fmt.Sprintf("attachment sha256:%s is not in %s; it was released or the directory was cleaned — the message that names it cannot be sent with it", hex, d.dir))
	}
	if err != nil {
		return nil, d.failed(err, "read blob sha256:"+hex)
	}
	return b, nil
}

func (d *disk) HasBlob(hex string) error {
	_, err := os.Stat(d.blobPath(hex))
	if errors.Is(err, fs.ErrNotExist) {
		return errs.New(NotFound, fmt.Sprintf("attachment sha256:%s is not in %s; it was released or the directory was cleaned", hex, d.dir))
	}
	if err != nil {
		return d.failed(err, "look up blob sha256:"+hex)
	}
	return nil
}

func (d *disk) RemoveBlob(hex string) error {
	if err := os.Remove(d.blobPath(hex)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.failed(err, "remove blob sha256:"+hex)
	}
	return nil
}

func (d *disk) Blobs() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(d.dir, "blobs"))
	if err != nil {
		return nil, d.failed(err, "list the blobs")
	}
	var out []string
	for _, e := range entries {
		if _, err := parseHex(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (d *disk) refDir(hex string) string { return filepath.Join(d.dir, "refs", hex) }

func (d *disk) AddRef(hex, session string) (bool, error) {
	dir := d.refDir(hex)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, d.failed(err, "record a reference")
	}
	f, err := os.OpenFile(filepath.Join(dir, markerName(session)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, d.failed(err, "record a reference")
	}
	f.Close()
	// The marker must be on disk before the log that needs it can be.
	if err := syncDir(dir); err != nil {
		return false, d.failed(err, "sync a reference")
	}
	return true, nil
}

func (d *disk) RemoveRef(hex, session string) error {
	if err := os.Remove(filepath.Join(d.refDir(hex), markerName(session))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.failed(err, "remove a reference")
	}
	// The directory goes once empty; a failure means another marker is
	// still in it.
	os.Remove(d.refDir(hex))
	return nil
}

func (d *disk) Refs(hex string) (map[string]bool, error) {
	entries, err := os.ReadDir(d.refDir(hex))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, d.failed(err, "list the references of sha256:"+hex)
	}
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		session, err := url.PathUnescape(e.Name())
		if err != nil {
			continue // not a marker this store wrote
		}
		out[session] = info.Size() > 0
	}
	return out, nil
}

func (d *disk) SessionBlobs(session string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(d.dir, "refs"))
	if err != nil {
		return nil, d.failed(err, "list the references")
	}
	var out []string
	for _, e := range entries {
		if _, err := parseHex(e.Name()); err != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d.refDir(e.Name()), markerName(session))); err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (d *disk) Verify(hex, session string) error {
	if err := os.WriteFile(filepath.Join(d.refDir(hex), markerName(session)), []byte("ok"), 0o600); err != nil {
		return d.failed(err, "mark a reference verified")
	}
	return nil
}

func (d *disk) Sweep() error {
	dir := filepath.Join(d.dir, "blobs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return d.failed(err, "list the blobs")
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

func (d *disk) Age(hex, session string) time.Duration {
	info, err := os.Stat(filepath.Join(d.refDir(hex), markerName(session)))
	if err != nil {
		return math.MaxInt64
	}
	return time.Since(info.ModTime())
}

// markerName makes a session id a file name: session ids are file-safe
// when persisted, but an in-memory agent's may hold '/' or '@'.
func markerName(session string) string { return url.PathEscape(session) }

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (d *disk) Usage() (int64, error) {
	entries, err := os.ReadDir(filepath.Join(d.dir, "blobs"))
	if err != nil {
		return 0, d.failed(err, "list the blobs")
	}
	var total int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil {
			total += info.Size()
		}
	}
	return total, nil
}
