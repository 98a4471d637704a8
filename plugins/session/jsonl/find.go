package jsonl

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/session"
)

var _ session.Finder = (*files)(nil)

// Find describes session id from its own log's head and tail, as a
// listing describes a session its catalog cannot vouch for. Without it
// the store found one session by listing all of them — every catalog
// line read and parsed, megabytes with thousands of sessions — and dsh
// serve asks for one session on every GET and close of it: a soak that
// closes and opens sessions spent its heap there, more the longer it ran.
// One log's two ends cost the same however many sessions are stored.
func (w *files) Find(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	if err := ctx.Err(); err != nil {
		return session.Summary{}, false, err
	}
	if !session.ValidID(id) {
		// Not a name a log can have: nothing is stored under it, and
		// it must not reach the file system as a path.
		return session.Summary{}, false, nil
	}
	s, _, ok := w.summarize(id)
	return s, ok, nil
}
