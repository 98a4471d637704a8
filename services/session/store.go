package session

import (
	stdctx "context"
	"fmt"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// validID is the shape of a session id that persistence can use as a
// file name on every system.
var validID = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// MaxIDLen bounds a session id so that it fits every store, checked once
// when the id is chosen rather than at the first flush: session.jsonl
// names files <id>.jsonl, and honours an older dsh's <id>.lock (255
// bytes a name on common file systems, 143 under eCryptfs, as in
// encrypted home directories), session.nats spells each '.' as three characters in a subject and a
// lease key; 128 fits all of them.
const MaxIDLen = 128

// IDRule says what ValidID accepts, for error messages.
const IDRule = "1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit"

// ValidID reports whether id can name a persisted session in every store:
// see IDRule.
func ValidID(id string) bool { return len(id) <= MaxIDLen && validID.MatchString(id) }

// Key is the service key of the session log, service "session".
var Key = dshctx.NewKey[*Store]("session")

// Backend loads persisted sessions. A persistence plugin registers one with
// Store.SetBackend; it also listens to session/event and session/flush to
// write.
type Backend interface {
	// Load returns the persisted log of a session, or an error with code
	// NotFound when none is persisted under that id.
	Load(ctx stdctx.Context, sessionID string) ([]Event, error)
}

// Store is the session log service: the live sessions by id.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*Session
	backend  Backend
	// signer signs the decision records of sessions opened from now on;
	// signers counts the fibers that installed it.
	signer  *Signer
	signers int
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{sessions: map[string]*Session{}} }

// Plugin provides the session log service, "session".
var Plugin = dshctx.Define("session", func(ctx *dshctx.Context, _ dshctx.None) error {
	return Key.Provide(ctx, NewStore())
})

// Create opens an empty session for agentID. Its events are dispatched at
// at, the agent's scope. With a Locker backend the session's lease is taken
// first: a session another writer holds is refused with SessionLocked.
func (st *Store) Create(at *dshctx.Context, agentID, sessionID string) (*Session, error) {
	return st.open(stdctx.Background(), at, agentID, sessionID, nil, nil, false)
}

// Restore opens a session from a persisted log, replaying it into history.
// A log that ends inside a turn is closed first; see Resume.
func (st *Store) Restore(at *dshctx.Context, agentID, sessionID string, events []Event) (*Session, error) {
	return st.open(stdctx.Background(), at, agentID, sessionID, func(stdctx.Context) ([]Event, error) { return events, nil }, nil, false)
}

// Resume opens a persisted session: it takes the session's lease, loads the
// log through the backend and replays it. A log that ends inside a turn —
// dsh was killed, or a dispose deadline passed while a tool ran — gets an
// error result for every tool call left unanswered and a turn/end with
// reason interrupted, appended as new events, so the history sent to the
// model is valid; Session.Interrupted then names the turn and its prompt.
func (st *Store) Resume(ctx stdctx.Context, at *dshctx.Context, agentID, sessionID string) (*Session, error) {
	b := st.getBackend()
	if b == nil {
		return nil, st.noBackend(sessionID)
	}
	return st.open(ctx, at, agentID, sessionID, func(ctx stdctx.Context) ([]Event, error) { return b.Load(ctx, sessionID) }, b, true)
}

// open takes the lease, then loads the log (when load is set), checks it and
// publishes the session; a failure anywhere releases the lease. stored
// says the session must already be stored (a resume): a StoredLocker then
// takes the lease without making it exist.
func (st *Store) open(ctx stdctx.Context, at *dshctx.Context, agentID, sessionID string,
	load func(stdctx.Context) ([]Event, error), b Backend, stored bool) (_ *Session, err error) {
	if sessionID == "" || at == nil {
		return nil, errs.New(errs.InvalidArgument, "sessions: a session needs an id and the agent's scope")
	}
	st.mu.Lock()
	err = st.taken(sessionID)
	if b == nil {
		b = st.backend
	}
	st.mu.Unlock()
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	signer := st.signer
	st.mu.Unlock()
	s := &Session{id: sessionID, agentID: agentID, at: at, signer: signer}
	if l, ok := b.(Locker); ok {
		var lease Lease
		var lerr error
		if sl, ok := l.(StoredLocker); ok && stored {
			lease, lerr = sl.LockStored(ctx, sessionID)
		} else {
			lease, lerr = l.Lock(ctx, sessionID)
		}
		if lerr != nil {
			return nil, lerr
		}
		s.lease = lease
		defer func() {
			if err != nil {
				lease.Release()
			}
		}()
	}
	var fix []Event
	if load != nil {
		events, err := load(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := Replay(events); err != nil {
			return nil, err
		}
		var in Interruption
		var ok bool
		if fix, in, ok = closing(events); ok {
			s.interrupted = &in
		}
		for _, e := range events {
			e = e.clone()
			s.push(e)
			s.index(e)
		}
		s.durable = int64(len(events))
	}
	st.mu.Lock()
	if err = st.taken(sessionID); err != nil {
		st.mu.Unlock()
		return nil, err
	}
	st.sessions[sessionID] = s
	st.mu.Unlock()
	// The closing events are new events of the log: persistence writes
	// them like any other, so the next load finds the turn closed.
	for _, e := range fix {
		s.Append(ctx, e)
	}
	if len(fix) > 0 {
		// Stored now, not at the next turn's checkpoint: the turn is
		// closed for whoever reads the log meanwhile (another host's
		// stream, dsh sessions show). A failure leaves the events pending;
		// the next checkpoint writes them or fails the turn.
		_ = s.Flush(ctx)
	}
	return s, nil
}

// taken refuses an id a live or closing session holds; the caller holds mu.
func (st *Store) taken(sessionID string) error {
	old, ok := st.sessions[sessionID]
	if !ok {
		return nil
	}
	old.mu.Lock()
	closing := old.closing
	old.mu.Unlock()
	if closing {
		return errs.New(SessionLocked, fmt.Sprintf(
			"session %q is still held by agent %q, whose dispose deadline passed while its turn was running; it is released when that turn stops — retry then", sessionID, old.agentID)).WithReason(ReasonClosing)
	}
	return errs.New(SessionExists, fmt.Sprintf("session %q is already open; pick another id or dispose its agent first", sessionID))
}

// Get returns a live session.
func (st *Store) Get(sessionID string) (*Session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[sessionID]
	return s, ok
}

// Closing marks s as being closed: its id stays taken, and a new open of it
// is refused with SessionLocked, reason session/closing, until Close.
func (st *Store) Closing(s *Session) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// Close forgets s — s itself, not whichever session now has its id — and
// releases its lease, which frees the id for the next writer. Persisted
// copies are the backend's.
func (st *Store) Close(s *Session) error {
	st.mu.Lock()
	if st.sessions[s.id] == s {
		delete(st.sessions, s.id)
	}
	st.mu.Unlock()
	if s.lease == nil {
		return nil
	}
	return s.lease.Release()
}

// SetBackend installs the persistence backend for as long as ctx's fiber
// lives.
func (st *Store) SetBackend(ctx *dshctx.Context, b Backend) error {
	_, err := ctx.Effect("session backend", func() (dshctx.Disposer, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.backend != nil {
			return nil, errs.New(errs.ServiceConflict, "sessions: a persistence backend is already installed")
		}
		st.backend = b
		return func() error {
			st.mu.Lock()
			st.backend = nil
			st.mu.Unlock()
			return nil
		}, nil
	})
	return err
}

// SetSigner has the sessions opened from now on sign their decision
// records with signer, for as long as ctx's fiber lives. The same key may
// be installed by several fibers (a preset that two agents share); a
// different key while one is installed is a conflict.
func (st *Store) SetSigner(ctx *dshctx.Context, signer *Signer) error {
	_, err := ctx.Effect("decision signer", func() (dshctx.Disposer, error) {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.signer != nil && st.signer.id != signer.id {
			return nil, errs.New(errs.ServiceConflict, fmt.Sprintf(
				"sessions: decision records are already signed with key %s; configure one signing key, not also %s", st.signer.id, signer.id))
		}
		st.signer = signer
		st.signers++
		return func() error {
			st.mu.Lock()
			st.signers--
			if st.signers == 0 {
				st.signer = nil
			}
			st.mu.Unlock()
			return nil
		}, nil
	})
	return err
}

// Load reads a persisted log through the backend, without taking its lease:
// for looking, not for resuming.
func (st *Store) Load(ctx stdctx.Context, sessionID string) ([]Event, error) {
	b := st.getBackend()
	if b == nil {
		return nil, st.noBackend(sessionID)
	}
	return b.Load(ctx, sessionID)
}

func (st *Store) getBackend() Backend {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.backend
}

func (st *Store) noBackend(sessionID string) error {
	return errs.New(NoPersistence, fmt.Sprintf(
		"cannot resume session %q: no session persistence backend is loaded; add a persistence plugin to the config", sessionID))
}
