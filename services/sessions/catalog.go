package sessions

import (
	stdctx "context"
	"time"
)

// State says where a listed session stands.
type State string

// Session states in a listing.
const (
	// StateOpen: open in this session controller.
	StateOpen State = "open"
	// StateOpenElsewhere: another writer (another process) holds it.
	StateOpenElsewhere State = "open-elsewhere"
	// StateInterrupted: its last turn never ended; resuming closes it.
	StateInterrupted State = "interrupted"
	// StateIdle: persisted, not open, nothing to repair.
	StateIdle State = "idle"
	// StateCorrupt: the stored log cannot be read; Summary.Error says why.
	// It can only be deleted.
	StateCorrupt State = "corrupt"
)

// Summary describes one persisted session without its log.
type Summary struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// Title is the session's first prompt.
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Turns   int       `json:"turns"`
	State   State     `json:"state"`
	// Holder names who holds a session open elsewhere, when known.
	Holder string `json:"holder,omitempty"`
	// Error says why a corrupt session cannot be read.
	Error string `json:"error,omitempty"`
}

// Catalog lists and deletes persisted sessions without loading their logs.
// The session store's persistence backend provides it (the lead wires it);
// without one, List and Delete report that nothing is persisted.
type Catalog interface {
	List(ctx stdctx.Context) ([]Summary, error)
	// Delete removes a persisted session; it refuses one open anywhere
	// with the store's SESSION_LOCKED.
	Delete(ctx stdctx.Context, sessionID string) error
}
