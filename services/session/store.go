package session

import (
	stdctx "context"
	"fmt"
	"regexp"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// validID is the shape of a session id that persistence can use as a
// file name on every system.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidID reports whether id can name a persisted session: letters,
// digits, '.', '_' and '-', starting with a letter or digit.
func ValidID(id string) bool { return validID.MatchString(id) }

// Key is the service key of the sessions service.
var Key = dshctx.NewKey[*Store]("sessions")

// Backend loads persisted sessions. A persistence plugin registers one with
// Store.SetBackend; it also listens to session/event and session/flush to
// write.
type Backend interface {
	// Load returns the persisted log of a session, or an error with code
	// NotFound when none is persisted under that id.
	Load(ctx stdctx.Context, sessionID string) ([]Event, error)
}

// Store is the sessions service: the live sessions by id.
type Store struct {
	mu       sync.Mutex
	sessions map[string]*Session
	backend  Backend
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{sessions: map[string]*Session{}} }

// Plugin provides the sessions service.
var Plugin = dshctx.Define("sessions", func(ctx *dshctx.Context, _ any) error {
	return Key.Provide(ctx, NewStore())
})

// Create opens an empty session for agentID. Its events are dispatched at
// at, the agent's scope.
func (st *Store) Create(at *dshctx.Context, agentID, sessionID string) (*Session, error) {
	return st.open(at, agentID, sessionID, nil)
}

// Restore opens a session from a persisted log, replaying it into history.
func (st *Store) Restore(at *dshctx.Context, agentID, sessionID string, events []Event) (*Session, error) {
	if _, err := Replay(events); err != nil {
		return nil, err
	}
	return st.open(at, agentID, sessionID, events)
}

func (st *Store) open(at *dshctx.Context, agentID, sessionID string, events []Event) (*Session, error) {
	if sessionID == "" || at == nil {
		return nil, errs.New(errs.InvalidArgument, "sessions: a session needs an id and the agent's scope")
	}
	s := &Session{id: sessionID, agentID: agentID, at: at}
	for _, e := range events {
		e = e.clone()
		s.push(e)
		s.index(e)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, taken := st.sessions[sessionID]; taken {
		return nil, errs.New(SessionExists, fmt.Sprintf("session %q is already open; pick another id or dispose its agent first", sessionID))
	}
	st.sessions[sessionID] = s
	return s, nil
}

// Get returns a live session.
func (st *Store) Get(sessionID string) (*Session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[sessionID]
	return s, ok
}

// Remove forgets a live session. Persisted copies are the backend's.
func (st *Store) Remove(sessionID string) {
	st.mu.Lock()
	delete(st.sessions, sessionID)
	st.mu.Unlock()
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

// Load reads a persisted log through the backend.
func (st *Store) Load(ctx stdctx.Context, sessionID string) ([]Event, error) {
	st.mu.Lock()
	b := st.backend
	st.mu.Unlock()
	if b == nil {
		return nil, errs.New(NoPersistence, fmt.Sprintf(
			"cannot resume session %q: no session persistence backend is loaded; add a persistence plugin to the config", sessionID))
	}
	return b.Load(ctx, sessionID)
}
