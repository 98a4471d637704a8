package jsonl

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// A listing reads the head and tail of the logs the catalog (catalog.go)
// cannot vouch for, never their middle. The head (headSize bytes) holds the first events — when the
// session was created, by which agent, and its first prompt; the tail
// holds the last whole event — when it was last written, the last turn,
// and whether that turn ended. The tail is read backwards in tailSize
// steps until it holds a whole line, so a log ending in one very large
// event costs that event's size.
const (
	headSize = 4 << 10
	tailSize = 4 << 10
)

var (
	_ session.Lister     = (*files)(nil)
	_ session.PageLister = (*files)(nil)
	_ session.Finder     = (*files)(nil)
	_ session.Deleter    = (*files)(nil)
)

// List describes every session in the directory from the catalog
// (catalog.go), reading only the logs it cannot vouch for. A file whose
// head or tail is not a session log is listed with StateCorrupt; files
// that are not <id>.jsonl are skipped.
func (w *files) List(ctx stdctx.Context) ([]session.Summary, error) {
	p, err := w.ListPage(ctx, session.ListOptions{})
	return p.Sessions, err
}

// ListPage lists one page: the sessions of opts.Agent, most recently
// updated first, after opts.Cursor. Every session's catalog line is read
// in place, but only the page's are decoded whole, and only the page is
// sorted (a heap of opts.Limit).
func (w *files) ListPage(ctx stdctx.Context, opts session.ListOptions) (_ session.Page, err error) {
	cursor := opts.Cursor != ""
	var cu int64
	var cid string
	if cursor {
		t, id, err := session.ParseCursor(opts.Cursor)
		if err != nil {
			return session.Page{}, err
		}
		cu, cid = unixNano(t), id
	}
	// The catalog is mapped: a catalog cut short by hand under the
	// listing faults, which fails this listing instead of the process.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errs.New(session.BadLog, fmt.Sprintf("session.jsonl: the catalog %s was cut while a listing read it; list again", filepath.Join(w.dir, catalogName)))
		}
	}()
	pg := pager{limit: opts.Limit}
	release, err := w.catalogList(ctx, func(updated int64, id, agent string) bool {
		return session.MatchAgent(agent, opts.Agent) && (!cursor || updated < cu || (updated == cu && id > cid))
	}, pg.add)
	if err != nil {
		return session.Page{}, err
	}
	defer release()
	keep := pg.sorted()
	p := session.Page{Sessions: make([]session.Summary, len(keep))}
	for i, c := range keep {
		p.Sessions[i] = c.summary()
	}
	if opts.Limit > 0 && pg.count > opts.Limit {
		p.Next = session.Cursor(p.Sessions[len(p.Sessions)-1])
	}
	return p, nil
}

// Find describes session id from its own log's head and tail and its
// lock, as a listing describes a session the catalog cannot vouch for: it
// reads neither the directory nor the catalog (but the catalog's tail for
// the holder of a session held), so it costs the same with ten sessions
// stored or a hundred thousand. The log is the truth the
// catalog copies, so the two agree. An id that cannot name a file names
// no stored session.
func (w *files) Find(_ stdctx.Context, id string) (session.Summary, bool, error) {
	if !session.ValidID(id) {
		return session.Summary{}, false, nil
	}
	path := filepath.Join(w.dir, id+".jsonl")
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return session.Summary{}, false, nil
	}
	if err != nil {
		return session.Summary{}, false, errs.Wrap(session.BadLog, err, fmt.Sprintf("session.jsonl: cannot read %s", path))
	}
	if !fi.Mode().IsRegular() {
		return session.Summary{}, false, nil // a listing skips it too
	}
	s, _, ok := w.summarize(id, nil)
	return s, ok, nil
}

// compareNewest orders a listing: most recently updated first, ties by id.
func compareNewest(a, b candidate) int {
	switch {
	case a.updated > b.updated:
		return -1
	case a.updated < b.updated:
		return 1
	}
	return strings.Compare(a.id, b.id)
}

// pager keeps the first limit candidates in listing order (all of them
// without a limit) in a heap whose root is the last of them: log limit
// work for a candidate that makes the page, one comparison for one that
// does not. count is every candidate it was given.
type pager struct {
	limit int
	count int
	h     []candidate
}

func (p *pager) add(c candidate) {
	p.count++
	if p.limit <= 0 {
		p.h = append(p.h, c)
		return
	}
	h := p.h
	if len(h) < p.limit {
		h = append(h, c)
		for i := len(h) - 1; i > 0; {
			up := (i - 1) / 2
			if compareNewest(h[i], h[up]) <= 0 {
				break
			}
			h[i], h[up] = h[up], h[i]
			i = up
		}
		p.h = h
		return
	}
	if compareNewest(c, h[0]) >= 0 {
		return
	}
	h[0] = c
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && compareNewest(h[r], h[l]) > 0 {
			l = r
		}
		if compareNewest(h[l], h[i]) <= 0 {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// sorted returns the candidates kept, in listing order.
func (p *pager) sorted() []candidate {
	slices.SortFunc(p.h, compareNewest)
	return p.h
}

// list describes every session from its log's head and tail, as List
// did before the catalog, and counts the bytes it read.
func (w *files) list(ctx stdctx.Context) ([]session.Summary, int64, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, 0, errs.Wrap(session.BadLog, err, fmt.Sprintf("session.jsonl: cannot read the session directory %s", w.dir))
	}
	var list []session.Summary
	var read int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, read, err
		}
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() {
			continue // lock files, and whatever else shares the directory
		}
		if !session.ValidID(id) {
			w.log.Warn("skipped a file that cannot be a session log: its name is not a session id", "file", filepath.Join(w.dir, e.Name()))
			continue
		}
		s, n, ok := w.summarize(id, nil)
		read += n
		if ok {
			list = append(list, s)
		}
	}
	return list, read, nil
}

// summarize describes one session from its log's head and tail and its
// lock; n is how many bytes it read. ok is false for a log deleted since
// the directory was read. A held session's holder is read from open, the
// last catalog line of the session when the caller has it, or from the
// catalog.
func (w *files) summarize(id string, open *entry) (s session.Summary, n int64, ok bool) {
	s = session.Summary{ID: id, State: session.StateIdle}
	path := filepath.Join(w.dir, id+".jsonl")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, n, false
	}
	if err != nil {
		return corrupt(s, fmt.Sprintf("cannot read %s: %v", path, err)), n, true
	}
	defer f.Close()
	isHeld, perr := held(f)
	fi, err := f.Stat()
	if err != nil {
		return corrupt(s, fmt.Sprintf("cannot read %s: %v", path, err)), n, true
	}
	s.Size = fi.Size()
	s.Created, s.Updated = fi.ModTime(), fi.ModTime()
	s, read := summarizeLog(s, f, path)
	n += read
	switch {
	case perr != nil:
		w.log.Warn("cannot tell whether a session is open", "session", id, "error", perr)
	case isHeld && s.Size == 0:
		// Held and not yet written: the lock made the log, nothing is
		// stored yet, as before the lock moved onto the log.
		return s, n, false
	case isHeld:
		who := holder{}
		if open != nil && open.kind == kindOpen {
			who = decodeHolder(open.title())
		} else {
			who = w.holderOf(id)
		}
		s.State, s.Holder = session.StateOpen, who.String()
	}
	return s, n, true
}

func corrupt(s session.Summary, why string) session.Summary {
	s.State, s.Error = session.StateCorrupt, why
	return s
}

// header is what a listing decodes of an event.
type header struct {
	Seq    int64        `json:"seq"`
	Type   session.Type `json:"type"`
	Time   time.Time    `json:"time"`
	Turn   int          `json:"turn"`
	Agent  string       `json:"agent"`
	Tenant string       `json:"tenant"`
}

func (h *header) decode(line []byte) error {
	if err := json.Unmarshal(line, h); err != nil {
		return err
	}
	if h.Seq == 0 {
		return errors.New("it has no seq")
	}
	if !h.Type.Known() {
		return fmt.Errorf("unknown event type %q", h.Type)
	}
	return nil
}

// summarizeLog fills s from the head and tail of the log in r, of s.Size
// bytes. A last line cut short — being written, or the trace of a crash
// that the next resume cuts off — is not an event yet: the last whole line
// decides.
func summarizeLog(s session.Summary, r io.ReaderAt, path string) (session.Summary, int64) {
	if s.Size == 0 {
		return s, 0
	}
	head := make([]byte, min(s.Size, headSize))
	n, err := r.ReadAt(head, 0)
	read := int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		return corrupt(s, fmt.Sprintf("cannot read %s: %v", path, err)), read
	}
	head = head[:n]
	lines := bytes.SplitAfter(head, []byte{'\n'})
	if !bytes.HasSuffix(lines[0], []byte{'\n'}) {
		if int64(n) < s.Size {
			return corrupt(s, fmt.Sprintf("%s:1: the first line is longer than %d bytes; it is not a session event", path, headSize)), read
		}
		return s, read // nothing whole written yet
	}
	var first header
	if err := first.decode(lines[0]); err != nil {
		return corrupt(s, fmt.Sprintf("%s:1: not a session event: %v", path, err)), read
	}
	if first.Seq != 1 {
		return corrupt(s, fmt.Sprintf("%s:1: the log starts at event %d, not 1", path, first.Seq)), read
	}
	s.Agent, s.Tenant, s.Created, s.Updated, s.Turns = first.Agent, first.Tenant, first.Time, first.Time, first.Turn
	for _, line := range lines[1:] {
		if typeOf(line) == session.UserMessage {
			s.Title = session.Title(contentPrefix(line))
			break
		}
	}
	last, tn, err := lastLine(r, s.Size, head)
	read += tn
	if err != nil {
		return corrupt(s, fmt.Sprintf("cannot read %s: %v", path, err)), read
	}
	var h header
	if err := h.decode(last); err != nil {
		return corrupt(s, fmt.Sprintf("%s: the last whole line is not a session event: %v", path, err)), read
	}
	s.Updated, s.Turns = h.Time, h.Turn
	if h.Type != session.TurnEnd {
		s.State = session.StateInterrupted
	}
	return s, read
}

// lastLine returns the last whole line of the size bytes in r; head is the
// first bytes, which hold at least one whole line. It reads backwards,
// doubling its step, until the buffer holds the newline before that line.
func lastLine(r io.ReaderAt, size int64, head []byte) ([]byte, int64, error) {
	if int64(len(head)) == size {
		return lastWhole(head), 0, nil
	}
	var read int64
	var buf []byte
	off, step := size, int64(tailSize)
	for {
		step = min(step, off)
		off -= step
		chunk := make([]byte, step, step+int64(len(buf)))
		n, err := r.ReadAt(chunk, off)
		read += int64(n)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, read, err
		}
		if int64(n) < step {
			return nil, read, io.ErrUnexpectedEOF // the file shrank
		}
		buf = append(chunk, buf...)
		if end := bytes.LastIndexByte(buf, '\n'); end >= 0 {
			if start := bytes.LastIndexByte(buf[:end], '\n'); start >= 0 {
				return buf[start+1 : end+1], read, nil
			}
			if off == 0 {
				return buf[:end+1], read, nil
			}
		}
		if off == 0 {
			return nil, read, io.ErrUnexpectedEOF
		}
		step *= 2
	}
}

// lastWhole returns the last line of b that ends with a newline, or nil;
// the line may start before b does.
func lastWhole(b []byte) []byte {
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return nil
	}
	start := bytes.LastIndexByte(b[:end], '\n') + 1
	return b[start : end+1]
}

// typeOf reads the type of the event on line, which may be cut short,
// from its first "type" key: the only one at the top of an event, and
// written before any nested object.
func typeOf(line []byte) session.Type {
	_, rest, ok := bytes.Cut(line, []byte(`"type":`))
	if !ok {
		return ""
	}
	rest = bytes.TrimLeft(rest, " ")
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	t, _, ok := bytes.Cut(rest[1:], []byte{'"'})
	if !ok {
		return ""
	}
	return session.Type(t)
}

// contentPrefix returns the start of the message content on line, which
// may be cut short. Encoded JSON has no unescaped quote inside a string, so
// the first `"content":"` is the message's key: the events' own fields have
// no such key and the message's id and role come before it.
func contentPrefix(line []byte) string {
	_, rest, ok := bytes.Cut(line, []byte(`"content":"`))
	if !ok {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(rest) && b.Len() < 4*session.TitleMax; i++ {
		c := rest[i]
		switch {
		case c == '"':
			return b.String()
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(rest) {
			break
		}
		i++
		switch rest[i] {
		case 'u':
			if i+4 >= len(rest) {
				return b.String()
			}
			var r string
			if json.Unmarshal([]byte(`"\u`+string(rest[i+1:i+5])+`"`), &r) == nil {
				b.WriteString(r)
			}
			i += 4
		case 'n', 't', 'r', 'b', 'f':
			b.WriteByte(' ')
		default: // '"', '\\', '/'
			b.WriteByte(rest[i])
		}
	}
	return strings.ToValidUTF8(b.String(), "") // a rune cut at the end
}
