package attachments

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
)

// Store is the attachments service: blobs by content, references by
// session, holds by live delivery. Safe for concurrent use.
type Store struct {
	b      Backend
	limits Limits

	mu    sync.Mutex
	holds map[holdKey]*hold
	// byHex counts the holds of each blob, across sessions.
	byHex map[string]int
	// written counts the bytes written to blobs, for the figures.
	written atomic.Int64
	recent  cache
}

type holdKey struct{ hex, session string }

// hold is this process's live interest in one session's reference: n
// takers (deliveries not yet settled, messages in the session); created
// says the first of them added the reference, so the last release removes
// it.
type hold struct {
	n       int
	created bool
}

// Open returns a store kept in dir (created if missing) — an attachments/
// directory beside the session files. Call Collect once the session logs
// can be read.
func Open(dir string, limits Limits) (*Store, error) {
	d, err := openDisk(dir)
	if err != nil {
		return nil, err
	}
	return newStore(d, limits), nil
}

// NewMemory returns a store for sessions that are not persisted.
func NewMemory(limits Limits) *Store { return newStore(newMemory(), limits) }

func newStore(b Backend, limits Limits) *Store {
	return &Store{b: b, limits: limits.withDefaults(), holds: map[holdKey]*hold{}, byHex: map[string]int{}}
}

// Persistent reports whether the blobs outlive the process. An in-memory
// store's references go with their session when it closes, since nothing
// can resume it.
func (s *Store) Persistent() bool {
	_, mem := s.b.(*memory)
	return !mem
}

// Close releases what the backend holds open (a JetStream backend's
// connection); the store is not used after it.
func (s *Store) Close() error {
	if c, ok := s.b.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Limits returns the store's limits, defaults filled in.
func (s *Store) Limits() Limits { return s.limits }

// Written returns the bytes written to blobs since the store opened
// (a blob already present is not written again).
func (s *Store) Written() int64 { return s.written.Load() }

// RefPrefix starts every reference.
const RefPrefix = "sha256:"

// RefOf returns the reference of data.
func RefOf(data []byte) string {
	sum := sha256.Sum256(data)
	return RefPrefix + hex.EncodeToString(sum[:])
}

// parseRef checks a reference and returns its hex digest, which names
// files: anything but 64 lower-case hex digits is refused.
func parseRef(ref string) (string, error) {
	h, ok := strings.CutPrefix(ref, RefPrefix)
	if !ok {
		return "", errs.New(BadPart, fmt.Sprintf("attachment reference %q does not start with %q", ref, RefPrefix))
	}
	return parseHex(h)
}

func parseHex(h string) (string, error) {
	if len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return "", errs.New(BadPart, fmt.Sprintf("attachment digest %q is not 64 lower-case hex digits", h))
	}
	if _, err := hex.DecodeString(h); err != nil {
		return "", errs.New(BadPart, fmt.Sprintf("attachment digest %q is not 64 lower-case hex digits", h))
	}
	return h, nil
}

func checkSession(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsRune(id, 0) {
		return errs.New(errs.InvalidArgument, fmt.Sprintf(
			"attachments: session id %q cannot hold references; give the session a non-empty id", id))
	}
	return nil
}

// Put stores data for sessionID and returns its reference and a release.
// The reference counts as the session's until release is called; a
// message that entered the session never calls it (the log keeps the
// reference until the session is deleted). release removes the reference
// if this Put added it and no other live taker holds it, and the blob when
// no session references it any more; calling it again does nothing.
func (s *Store) Put(sessionID string, data []byte) (ref string, release func(), err error) {
	ref = RefOf(data)
	h := ref[len(RefPrefix):]
	if err := s.take(holdKey{h, sessionID}, data); err != nil {
		return "", nil, err
	}
	var once sync.Once
	return ref, func() { once.Do(func() { s.drop(holdKey{h, sessionID}) }) }, nil
}

// Hold makes sessionID a taker of a blob already in the store (a part
// that arrives as a reference, as a client forwarding history sends).
func (s *Store) Hold(sessionID, ref string) (release func(), err error) {
	h, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	if err := s.take(holdKey{h, sessionID}, nil); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { s.drop(holdKey{h, sessionID}) }) }, nil
}

// take adds a taker; data, when set, is written if the blob is missing.
func (s *Store) take(k holdKey, data []byte) error {
	if err := checkSession(k.session); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if hd := s.holds[k]; hd != nil && data == nil {
		hd.n++
		return nil
	}
	unlock, err := s.b.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	// The marker first: a blob is never on disk unreferenced except
	// between a release's two removals, which hold the lock.
	added, err := s.b.AddRef(k.hex, k.session)
	if err != nil {
		return err
	}
	if data != nil {
		if err := s.room(k.hex, len(data)); err != nil {
			if added {
				s.b.RemoveRef(k.hex, k.session)
			}
			return err
		}
		n, err := s.b.WriteBlob(k.hex, data)
		if err != nil {
			if added {
				s.b.RemoveRef(k.hex, k.session)
			}
			return err
		}
		s.written.Add(n)
	} else if err := s.b.HasBlob(k.hex); err != nil {
		// Checked under the lock: no other process removes it now.
		if added {
			s.b.RemoveRef(k.hex, k.session)
		}
		return err
	}
	if hd := s.holds[k]; hd != nil {
		hd.n++
		return nil
	}
	s.holds[k] = &hold{n: 1, created: added}
	s.byHex[k.hex]++
	return nil
}

func (s *Store) drop(k holdKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hd := s.holds[k]
	if hd == nil {
		return
	}
	if hd.n--; hd.n > 0 {
		return
	}
	s.unhold(k)
	if !hd.created {
		return
	}
	unlock, err := s.b.Lock()
	if err != nil {
		return // the marker stays; Collect removes it at the next start
	}
	defer unlock()
	if s.b.RemoveRef(k.hex, k.session) != nil {
		return
	}
	s.removeIfUnreferenced(k.hex)
}

// removeIfUnreferenced removes a blob no session references; the caller
// holds mu and the backend lock.
func (s *Store) removeIfUnreferenced(h string) {
	refs, err := s.b.Refs(h)
	if err != nil || len(refs) > 0 {
		return
	}
	if s.byHex[h] > 0 {
		return
	}
	s.recent.remove(h)
	s.b.RemoveBlob(h)
}

// unhold drops a hold; the caller holds mu.
func (s *Store) unhold(k holdKey) {
	delete(s.holds, k)
	if s.byHex[k.hex]--; s.byHex[k.hex] <= 0 {
		delete(s.byHex, k.hex)
	}
}

// Forget drops this process's holds of a session that closed, keeping its
// references: they are in its log. The holds of open sessions are all a
// long-running process keeps. A delivery to the session still settling
// releases nothing after this; the next start collects what it left.
func (s *Store) Forget(sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(sessionID)
}

func (s *Store) forgetLocked(sessionID string) {
	for k := range s.holds {
		if k.session == sessionID {
			s.unhold(k)
		}
	}
}

// Get returns the bytes of ref, from memory when they were read lately.
// The bytes may be shared: do not change them.
func (s *Store) Get(ref string) ([]byte, error) {
	h, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	if data, ok := s.recent.get(h); ok {
		return data, nil
	}
	data, err := s.b.ReadBlob(h)
	if err != nil {
		return nil, err
	}
	s.recent.put(h, data)
	return data, nil
}

// Referrers returns the sessions that reference ref, sorted.
func (s *Store) Referrers(ref string) ([]string, error) {
	h, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	refs, err := s.b.Refs(h)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(refs)), nil
}

// Has reports whether the store holds ref, asking the backend.
func (s *Store) Has(ref string) bool {
	h, err := parseRef(ref)
	if err != nil {
		return false
	}
	unlock, err := s.b.Lock()
	if err != nil {
		return false
	}
	defer unlock()
	return s.b.HasBlob(h) == nil
}

// ReleaseSession drops every reference of sessionID and removes the blobs
// no other session references: what deleting the session does.
func (s *Store) ReleaseSession(sessionID string) error {
	if err := checkSession(sessionID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(sessionID)
	unlock, err := s.b.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	mine, err := s.b.SessionBlobs(sessionID)
	if err != nil {
		return err
	}
	var failed []error
	for _, h := range mine {
		if err := s.b.RemoveRef(h, sessionID); err != nil {
			failed = append(failed, err)
			continue
		}
		s.removeIfUnreferenced(h)
	}
	return errors.Join(failed...)
}

// room refuses a blob that is not stored yet and would take the store past
// its limit; the caller holds the backend lock, so two writers cannot both
// take the last room.
func (s *Store) room(hex string, n int) error {
	if s.b.HasBlob(hex) == nil {
		return nil // stored already: costs nothing
	}
	used, err := s.b.Usage()
	if err != nil {
		return err
	}
	if used+int64(n) > s.limits.Store {
		return errs.New(StoreFull, fmt.Sprintf(
			"the attachments store holds %d bytes and a part of %d bytes would take it past its limit of %d bytes; delete sessions you no longer need (dsh sessions rm), or raise attachments.max_store_bytes",
			used, n, s.limits.Store))
	}
	return nil
}
