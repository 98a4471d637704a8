package session

import (
	stdctx "context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
)

// Unsupported: the persistence backend cannot do what was asked (list or
// delete sessions).
const Unsupported errs.Code = "SESSION_UNSUPPORTED"

// State of a persisted session, as a listing sees it.
type State string

const (
	// StateOpen: a writer holds the session, in this process or another;
	// it cannot be resumed or deleted until that writer lets it go.
	StateOpen State = "open"
	// StateInterrupted: the log ends inside a turn (dsh stopped before the
	// turn ended); a resume closes the turn first.
	StateInterrupted State = "interrupted"
	// StateIdle: nobody holds the session and its last turn ended.
	StateIdle State = "idle"
	// StateCorrupt: the session's log cannot be read as one; Summary.Error
	// says why. It is listed so it can be found and deleted.
	StateCorrupt State = "corrupt"
)

// TitleMax caps a Summary's Title, in characters.
const TitleMax = 80

// Summary describes one persisted session without its log.
type Summary struct {
	ID string `json:"id"`
	// Agent is the id of the agent that wrote the session; empty for logs
	// written before backends recorded it.
	Agent string `json:"agent,omitempty"`
	// Title is the first user prompt on one line, cut to TitleMax
	// characters.
	Title   string    `json:"title,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Turns is the number of the last turn the log holds.
	Turns int   `json:"turns"`
	State State `json:"state"`
	// Holder names who holds an open session, when it is known.
	Holder string `json:"holder,omitempty"`
	// Size is the size of the stored log in bytes.
	Size int64 `json:"size"`
	// LastSeq is the seq of the last event stored, when the backend keeps
	// it at hand (session.nats does); 0 otherwise.
	LastSeq int64 `json:"last_seq,omitempty"`
	// Error says why a corrupt session cannot be read.
	Error string `json:"error,omitempty"`
	// Parent is the session a subagent's session was made for (see
	// ChildID); empty for every other session.
	Parent string `json:"parent,omitempty"`
	// Tenant is the tenant the session belongs to, as its log records it;
	// empty for a session only operators see.
	Tenant string `json:"tenant,omitempty"`
}

// childMark separates a parent's session id from the rest of a child's.
const childMark = ".sub-"

// ChildID is the id of a subagent session started from session parent:
// "<parent>.sub-<suffix>", suffix made of letters, digits, '.', '_' and
// '-'. The link is in the id itself, so every backend keeps it and a
// listing shows it (Summary.Parent) without reading the log.
func ChildID(parent, suffix string) string { return parent + childMark + suffix }

// ParentOf returns the parent of a session id made by ChildID, and false
// for an id that is not a child's.
func ParentOf(id string) (string, bool) {
	i := strings.LastIndex(id, childMark)
	if i <= 0 {
		return "", false
	}
	return id[:i], true
}

// Lister is implemented by backends that can list their sessions without
// loading their logs.
type Lister interface {
	// List describes every stored session. One unreadable session is
	// listed with StateCorrupt; it never fails the listing.
	List(ctx stdctx.Context) ([]Summary, error)
}

// Finder is implemented by backends that can describe one stored session
// by its id without listing the others (session.nats reads its index).
type Finder interface {
	// Find describes session id; found is false when nothing is stored
	// under it.
	Find(ctx stdctx.Context, sessionID string) (sum Summary, found bool, err error)
}

// Deleter is implemented by backends that can delete a stored session.
type Deleter interface {
	// Delete removes the session, taking its lease first: a session held by
	// a writer is refused with SessionLocked naming the holder and nothing
	// is removed. A session not stored is NotFound.
	Delete(ctx stdctx.Context, sessionID string) error
}

// Title turns a prompt into a one-line title of at most TitleMax
// characters: runs of white space become one space, and a cut title ends
// with "…". A prompt command's message (prompt.commands records it as
// Claude Code does, the typed line in <command-name> and <command-args>
// tags before the expansion) is titled by the line the user typed.
func Title(prompt string) string {
	if typed, ok := commandLine(prompt); ok {
		prompt = typed
	}
	var b strings.Builder
	n, cut := 0, 0
	// emit adds r unless the title is full; it remembers where "…" goes.
	emit := func(r rune) bool {
		if n == TitleMax-1 {
			cut = b.Len()
		}
		if n == TitleMax {
			return false
		}
		b.WriteRune(r)
		n++
		return true
	}
	space := false
	for _, r := range prompt {
		if unicode.IsSpace(r) {
			space = n > 0
			continue
		}
		if (space && !emit(' ')) || !emit(r) { // stop early: a prompt can be megabytes
			return b.String()[:cut] + "…"
		}
		space = false
	}
	return b.String()
}

// List describes every persisted session, most recently updated first. A
// session open in this store is reported open by its agent even when the
// backend cannot tell.
func (st *Store) List(ctx stdctx.Context) ([]Summary, error) {
	b := st.getBackend()
	if b == nil {
		return nil, errs.New(NoPersistence,
			"cannot list sessions: no session persistence backend is loaded; add a persistence plugin (e.g. session.jsonl) to the config")
	}
	l, ok := b.(Lister)
	if !ok {
		return nil, errs.New(Unsupported, fmt.Sprintf(
			"cannot list sessions: the persistence backend (%T) cannot list them; use a backend that can, such as session.jsonl", b))
	}
	list, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	for i := range list {
		list[i].Parent, _ = ParentOf(list[i].ID)
		if s, ok := st.sessions[list[i].ID]; ok {
			list[i].State = StateOpen
			list[i].Holder = fmt.Sprintf("agent %q of this process", s.agentID)
		}
	}
	st.mu.Unlock()
	sort.SliceStable(list, func(i, j int) bool {
		if !list[i].Updated.Equal(list[j].Updated) {
			return list[i].Updated.After(list[j].Updated)
		}
		return list[i].ID < list[j].ID
	})
	return list, nil
}

// Find describes persisted session id, as List would: by key where the
// backend can (Finder), else from the listing. found is false when
// nothing is stored under id.
func (st *Store) Find(ctx stdctx.Context, id string) (Summary, bool, error) {
	b := st.getBackend()
	if b == nil {
		return Summary{}, false, nil // nothing persists, so nothing is stored
	}
	if f, ok := b.(Finder); ok {
		sum, found, err := f.Find(ctx, id)
		if err != nil || !found {
			return Summary{}, false, err
		}
		sum.Parent, _ = ParentOf(sum.ID)
		st.mu.Lock()
		if s, ok := st.sessions[id]; ok {
			sum.State = StateOpen
			sum.Holder = fmt.Sprintf("agent %q of this process", s.agentID)
		}
		st.mu.Unlock()
		return sum, true, nil
	}
	list, err := st.List(ctx)
	if err != nil {
		return Summary{}, false, err
	}
	for _, sum := range list {
		if sum.ID == id {
			return sum, true, nil
		}
	}
	return Summary{}, false, nil
}

// Delete removes a persisted session. A session open in this store, or
// held by a writer anywhere, is refused with SessionLocked naming its
// holder, and nothing is deleted; a session not stored is NotFound.
func (st *Store) Delete(ctx stdctx.Context, sessionID string) error {
	if sessionID == "" {
		return errs.New(errs.InvalidArgument, "cannot delete a session: no session id given")
	}
	b := st.getBackend()
	if b == nil {
		return errs.New(NoPersistence, fmt.Sprintf(
			"cannot delete session %q: no session persistence backend is loaded; add a persistence plugin (e.g. session.jsonl) to the config", sessionID))
	}
	d, ok := b.(Deleter)
	if !ok {
		return errs.New(Unsupported, fmt.Sprintf(
			"cannot delete session %q: the persistence backend (%T) cannot delete sessions; remove it by the backend's own means", sessionID, b))
	}
	st.mu.Lock()
	s, open := st.sessions[sessionID]
	st.mu.Unlock()
	if open {
		return errs.New(SessionLocked, fmt.Sprintf(
			"cannot delete session %q: agent %q of this process has it open; close the session first", sessionID, s.agentID)).WithReason(ReasonOpenHere)
	}
	return d.Delete(ctx, sessionID)
}

// commandLine returns "/name args" for a prompt recorded as a command.
func commandLine(prompt string) (string, bool) {
	rest, ok := strings.CutPrefix(prompt, "<command-name>")
	if !ok {
		return "", false
	}
	name, rest, ok := strings.Cut(rest, "</command-name>")
	if !ok {
		return "", false
	}
	if args, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t\r\n"), "<command-args>"); ok {
		if args, _, ok = strings.Cut(args, "</command-args>"); ok {
			return name + " " + args, true
		}
	}
	return name, true
}

// ListOptions narrows a listing to one page: the sessions of one agent,
// most recently updated first, at most Limit of them, after a cursor.
type ListOptions struct {
	// Agent keeps only the sessions this agent wrote: Summary.Agent is
	// Agent, or Agent followed by "@" (a session the controller opened is
	// "<agent>@<session>"). Empty keeps all.
	Agent string
	// Limit caps the page; 0 or less lists every session.
	Limit int
	// Cursor is a previous page's Next: the page starts after it.
	Cursor string
}

// Page is one page of a listing.
type Page struct {
	Sessions []Summary `json:"sessions"`
	// Next is the cursor of the following page; empty on the last.
	Next string `json:"next,omitempty"`
}

// PageLister is implemented by backends that can list one page without
// describing every stored session (session.jsonl reads its catalog).
// Sessions come most recently updated first, ties by id.
type PageLister interface {
	ListPage(ctx stdctx.Context, opts ListOptions) (Page, error)
}

// MatchAgent reports whether a session written by agent belongs to the
// agent a listing asks for (ListOptions.Agent).
func MatchAgent(agent, want string) bool {
	if want == "" || agent == want {
		return true
	}
	rest, ok := strings.CutPrefix(agent, want)
	return ok && strings.HasPrefix(rest, "@")
}

// Newer is the order of a listing: most recently updated first, ties by
// id, so a cursor names one place in it.
func Newer(a, b Summary) bool { return newer(a.Updated, a.ID, b.Updated, b.ID) }

func newer(at time.Time, aid string, bt time.Time, bid string) bool {
	if !at.Equal(bt) {
		return at.After(bt)
	}
	return aid < bid
}

// Cursor is where a page that ends with sum stops: the Next of its Page.
func Cursor(sum Summary) string {
	var ns int64
	if !sum.Updated.IsZero() {
		ns = sum.Updated.UnixNano()
	}
	return strconv.FormatInt(ns, 10) + "/" + sum.ID
}

// ParseCursor reads a Cursor back: the update time and id a page starts
// after.
func ParseCursor(c string) (updated time.Time, id string, err error) {
	ns, id, ok := strings.Cut(c, "/")
	n, perr := strconv.ParseInt(ns, 10, 64)
	if !ok || perr != nil || id == "" {
		return time.Time{}, "", errs.New(errs.InvalidArgument, fmt.Sprintf("the cursor %q is not one a listing returned; list from the first page", c))
	}
	if n == 0 {
		return time.Time{}, id, nil
	}
	return time.Unix(0, n), id, nil
}

// After reports whether sum comes after the cursor position (updated, id)
// in a listing's order.
func After(sum Summary, updated time.Time, id string) bool {
	return newer(updated, id, sum.Updated, sum.ID)
}

// Paginate cuts a listing to the page opts asks for; list is sorted in
// place. It serves backends that describe every session anyway.
func Paginate(list []Summary, opts ListOptions) (Page, error) {
	var cu time.Time
	var cid string
	if opts.Cursor != "" {
		var err error
		if cu, cid, err = ParseCursor(opts.Cursor); err != nil {
			return Page{}, err
		}
	}
	out := list[:0:0]
	for _, s := range list {
		if MatchAgent(s.Agent, opts.Agent) && (opts.Cursor == "" || After(s, cu, cid)) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return Newer(out[i], out[j]) })
	var p Page
	if opts.Limit > 0 && len(out) > opts.Limit {
		out = out[:opts.Limit]
		p.Next = Cursor(out[len(out)-1])
	}
	p.Sessions = out
	return p, nil
}

// ListPage lists one page of the persisted sessions (see ListOptions): by
// the backend's own means when it is a PageLister, else cut from List. A
// session open in this store is reported open, as List does.
func (st *Store) ListPage(ctx stdctx.Context, opts ListOptions) (Page, error) {
	b := st.getBackend()
	pl, ok := b.(PageLister)
	if !ok {
		list, err := st.List(ctx)
		if err != nil {
			return Page{}, err
		}
		return Paginate(list, opts)
	}
	p, err := pl.ListPage(ctx, opts)
	if err != nil {
		return Page{}, err
	}
	st.mu.Lock()
	for i := range p.Sessions {
		p.Sessions[i].Parent, _ = ParentOf(p.Sessions[i].ID)
		if s, ok := st.sessions[p.Sessions[i].ID]; ok {
			p.Sessions[i].State = StateOpen
			p.Sessions[i].Holder = fmt.Sprintf("agent %q of this process", s.agentID)
		}
	}
	st.mu.Unlock()
	return p, nil
}

// MaxTenantLen bounds a tenant's name: it is written into every stored
// log's metadata and, on session.nats, into every message's headers.
const MaxTenantLen = 128

// CheckTenant says what is wrong with a tenant's name, or nil: 1 to
// MaxTenantLen bytes of printable UTF-8, so that it can be shown in a log
// line and stored as metadata (a catalog column, a header) as it is.
func CheckTenant(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("it is empty")
	case len(t) > MaxTenantLen:
		return fmt.Errorf("it is %d bytes long, over %d", len(t), MaxTenantLen)
	case !utf8.ValidString(t):
		return fmt.Errorf("it is not UTF-8")
	case strings.IndexFunc(t, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("it holds a control or other non-printable character")
	}
	return nil
}
