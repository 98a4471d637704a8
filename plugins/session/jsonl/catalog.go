package jsonl

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/atomicfile"
	"github.com/dsh-go/dsh/services/session"
)

// The catalog is one file beside the logs, catalogName, that lets a
// listing describe 100,000 sessions without opening their logs: one line
// per change of a session, appended, the last line of a session telling
// what it is now. The logs stay the truth, and the catalog is trusted only
// where no writer can have changed a log behind it:
//
//   - a writer appends an "open" line, and syncs it, as soon as it holds
//     the session's lock and before it touches the log (writing, cutting a
//     torn line); its release appends a "closed" line with the summary of
//     the log as it left it, read from the log's head and tail;
//   - a listing trusts a closed line; a session whose last line is open
//     (held now, or its writer died) or that has no line (a log copied in,
//     a catalog lost or torn) is described from its log, as before;
//   - the directory says which sessions exist: a line for a log that is
//     gone is ignored, so Delete's "gone" line only helps compaction.
//
// A line carries a CRC, so a torn or garbled line is skipped; the line
// before it then decides, and a writer's open line comes before any write
// to its log, so skipping a closed line can only send the listing to the
// log. Appends hold a shared flock on the catalog; a compaction, which
// rewrites it with one line per session and adds the sessions a listing
// had to read from their logs, holds the exclusive one and renames a new
// file into place, so no append is lost to it.
const catalogName = ".catalog"

// Kinds of catalog lines.
const (
	kindOpen   = 'o'
	kindClosed = 'c'
	kindGone   = 'g'
)

// compactSlack is how many more lines than sessions the catalog may hold
// before a listing compacts it; twice the sessions, plus this.
const compactSlack = 256

// entry is one catalog line, parsed as far as a listing needs for every
// session: the rest is decoded only for the sessions of the page.
type entry struct {
	kind    byte
	updated int64 // unix ns
	id      string
	agent   string
	rest    []byte // created, turns, size, ended, title[, tenant]
	raw     []byte // the whole line, without its newline
	off     int64  // where the line starts in the file
}

// encodeEntry is the catalog line of sum, of kind.
func encodeEntry(kind byte, sum session.Summary) []byte {
	var b []byte
	b = append(b, "00000000\t"...)
	b = append(b, kind, '\t')
	b = strconv.AppendInt(b, unixNano(sum.Updated), 10)
	b = append(b, '\t')
	b = append(b, sum.ID...)
	b = append(b, '\t')
	b = append(b, field(sum.Agent)...)
	b = append(b, '\t')
	b = strconv.AppendInt(b, unixNano(sum.Created), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(sum.Turns), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, sum.Size, 10)
	b = append(b, '\t')
	if sum.State == session.StateInterrupted {
		b = append(b, '0')
	} else {
		b = append(b, '1')
	}
	b = append(b, '\t')
	b = append(b, field(sum.Title)...)
	if sum.Tenant != "" {
		// A column of its own after the title, written only when there
		// is a tenant: the lines of tenantless sessions stay as they were.
		b = append(b, '\t')
		b = append(b, field(sum.Tenant)...)
	}
	crc := crc32.ChecksumIEEE(b[9:])
	hex := strconv.AppendUint(nil, uint64(crc)|1<<32, 16) // fixed width: "1" + 8 digits
	copy(b, hex[1:])
	return append(b, '\n')
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// field keeps a value on its line and in its column: titles have no tabs
// or newlines (session.Title folds white space), agent ids neither; this
// only guards against what a hand-edited log may hold.
func field(s string) string {
	if !strings.ContainsAny(s, "\t\n") {
		return s
	}
	return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
}

// parseEntry reads the head of a catalog line (without its newline); ok
// is false for a line that is torn or garbled. The id points into line,
// which must not change; agents interns the agent ids, which are few.
func parseEntry(line []byte, agents map[string]string) (e entry, ok bool) {
	if _, ok := checkLine(line); !ok {
		return e, false
	}
	return parseFields(line, agents)
}

// parseFields reads the head of a line whose CRC was checked.
func parseFields(line []byte, agents map[string]string) (e entry, ok bool) {
	rest := line[9:]
	var f [4][]byte
	for i := range f {
		j := bytes.IndexByte(rest, '\t')
		if j < 0 {
			return e, false
		}
		f[i], rest = rest[:j], rest[j+1:]
	}
	if len(f[0]) != 1 || len(f[2]) == 0 {
		return e, false
	}
	e.kind = f[0][0]
	if e.updated, ok = parseInt(f[1]); !ok {
		return e, false
	}
	agent, known := agents[string(f[3])]
	if !known {
		agent = string(f[3])
		agents[agent] = agent
	}
	e.id, e.agent, e.rest, e.raw = unsafe.String(&f[2][0], len(f[2])), agent, rest, line
	return e, true
}

func parseHex32(b []byte) (uint32, bool) {
	var v uint32
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// title is the last column: a closed line's title, an open line's holder.
func (e entry) title() string {
	rest := e.rest
	for range 4 {
		i := bytes.IndexByte(rest, '\t')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	if i := bytes.IndexByte(rest, '\t'); i >= 0 {
		rest = rest[:i] // the tenant's column follows
	}
	return string(rest)
}

// summary decodes the whole entry.
func (e entry) summary() (session.Summary, bool) {
	f := strings.SplitN(string(e.rest), "\t", 6)
	if len(f) != 5 && len(f) != 6 {
		return session.Summary{}, false
	}
	created, err1 := strconv.ParseInt(f[0], 10, 64)
	turns, err2 := strconv.Atoi(f[1])
	size, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return session.Summary{}, false
	}
	s := session.Summary{ID: e.id, Agent: e.agent, Title: f[4], Created: fromNano(created), Updated: fromNano(e.updated),
		Turns: turns, Size: size, State: session.StateIdle}
	if len(f) == 6 {
		s.Tenant = f[5]
	}
	if f[3] == "0" {
		s.State = session.StateInterrupted
	}
	return s, true
}

// catalogFile is a catalog as read: its lines, and the last line of
// each session. The entries' ids point into buf.
type catalogFile struct {
	buf     []byte
	entries []entry
	last    map[string]int32 // id → its last line in entries
	size    int64            // bytes read; lines after them were appended since
	ino     uint64
	found   bool
}

// at returns the last line of session id.
func (c *catalogFile) at(id string) (*entry, bool) {
	i, ok := c.last[id]
	if !ok {
		return nil, false
	}
	return &c.entries[i], true
}

// readCatalog reads the catalog at path whole. A missing catalog is empty.
func readCatalog(path string) (catalogFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return catalogFile{last: map[string]int32{}}, nil
	}
	if err != nil {
		return catalogFile{}, err
	}
	defer f.Close()
	return readCatalogFrom(f)
}

func readCatalogFrom(f *os.File) (catalogFile, error) {
	fi, err := f.Stat()
	if err != nil {
		return catalogFile{}, err
	}
	buf := make([]byte, fi.Size())
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return catalogFile{}, err
	}
	buf = buf[:n]
	guess := n/96 + 1
	c := catalogFile{buf: buf, entries: make([]entry, 0, guess), last: make(map[string]int32, guess), size: int64(n), found: true}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		c.ino = uint64(st.Ino)
	}
	agents := map[string]string{}
	for off := 0; off < len(buf); {
		end := bytes.IndexByte(buf[off:], '\n')
		if end < 0 {
			c.size = int64(off) // a line being appended, or torn
			break
		}
		if e, ok := parseEntry(buf[off:off+end], agents); ok {
			e.off = int64(off)
			c.last[e.id] = int32(len(c.entries))
			c.entries = append(c.entries, e)
		}
		off += end + 1
	}
	return c, nil
}

// note appends one line to the catalog of dir under its shared lock, and
// syncs it when durable is set: an open line must be on disk before the
// log it vouches for changes.
func note(dir string, line []byte, durable bool) error {
	path := filepath.Join(dir, catalogName)
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		if err := flockWait(f, syscall.LOCK_SH); err != nil {
			f.Close()
			return err
		}
		// A compaction renamed a new catalog over this one while we
		// waited: write to the one at path.
		if !samePath(f, path) {
			f.Close()
			if attempt < 100 {
				continue
			}
			return errors.New("the catalog keeps being replaced")
		}
		// A leading newline ends a line a crash tore (an empty line is
		// skipped): without it this line would join the fragment and be
		// lost with it.
		_, err = f.Write(append([]byte{'\n'}, line...))
		if err == nil && durable {
			err = f.Sync()
		}
		return errors.Join(err, f.Close())
	}
}

func flockWait(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// noteOpen marks session id open in the catalog: its log may change now.
func (w *files) noteOpen(id string) error {
	if err := note(w.dir, encodeEntry(kindOpen, session.Summary{ID: id, Title: me().encode()}), true); err != nil {
		return errs.Wrap(session.FlushFailed, err, fmt.Sprintf(
			"session.jsonl: cannot mark session %q open in the catalog %s; check the directory's permissions and free space",
			id, filepath.Join(w.dir, catalogName)))
	}
	return nil
}

// noteClosed records what the log of session id is as its writer leaves
// it; the caller still holds the session's lock. A log that cannot be
// read keeps its open line, so listings read the log and say why.
func (w *files) noteClosed(id, path string) {
	var line []byte
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		line = encodeEntry(kindGone, session.Summary{ID: id})
	case err != nil:
		return
	default:
		fi, serr := f.Stat()
		if serr != nil {
			f.Close()
			return
		}
		s := session.Summary{ID: id, State: session.StateIdle, Size: fi.Size(), Created: fi.ModTime(), Updated: fi.ModTime()}
		s, _ = summarizeLog(s, f, path)
		f.Close()
		if s.State == session.StateCorrupt {
			return
		}
		line = encodeEntry(kindClosed, s)
	}
	// Without its closed line the session is read from its log: slower,
	// never wrong. Only a listing's speed depends on this line.
	if err := note(w.dir, line, false); err != nil {
		w.log.Warn("session.jsonl: cannot record a closed session in the catalog; listings read its log until they can", "session", id, "error", err)
	}
}

// candidate is a session a listing may show: from its closed catalog line
// (e), or from its log (sum). Its id and e point into the catalog read,
// valid until the listing releases it.
type candidate struct {
	updated int64
	id      string
	agent   string
	e       entry
	sum     *session.Summary
}

func (c candidate) summary() session.Summary {
	if c.sum != nil {
		return *c.sum
	}
	if s, ok := c.e.summary(); ok {
		s.ID = strings.Clone(s.ID)
		return s
	}
	return session.Summary{ID: strings.Clone(c.id), State: session.StateCorrupt, Error: "its catalog line cannot be read; list again"}
}

// afterMap, set by a test, runs once a listing has mapped the catalog.
var afterMap func()

// catalogList gives add the sessions of the directory that match. With a
// census the directory still agrees with (table.go), the catalog says
// which sessions exist; otherwise the directory does (reconcile). Closed
// lines describe their sessions; the logs describe the others, which it
// then writes into the catalog (compact) so the next listing need not
// read them. The candidates point into the catalog read until release.
func (w *files) catalogList(ctx stdctx.Context, match func(updated int64, id, agent string) bool, add func(candidate)) (release func(), err error) {
	// The clock, then the directory, then the catalog: a census written
	// from them holds for what the directory held at that mtime.
	now := time.Now().UnixNano()
	mtime, ino, err := statDir(w.dir)
	if err != nil {
		return nil, errs.Wrap(session.BadLog, err, fmt.Sprintf("session.jsonl: cannot read the session directory %s", w.dir))
	}
	t, err := openTable(filepath.Join(w.dir, catalogName))
	if err != nil {
		// Unreadable: every session is read from its log, as before.
		w.log.Warn("session.jsonl: cannot read the catalog; listing from the logs", "error", err)
		t = &catalogTable{}
		t.scan()
	}
	// A catalog cut under the listing faults (ListPage recovers): the
	// mapping goes with the failed listing, not with the process.
	kept := false
	defer func() {
		if !kept {
			t.close()
		}
	}()
	if afterMap != nil {
		afterMap()
	}
	if t.counted && t.garbled == 0 && t.census.trusted(mtime, ino, now) {
		err = w.fromCatalog(ctx, t, match, add)
	} else {
		err = w.reconcile(ctx, t, match, add, now, mtime, ino)
	}
	if err != nil {
		return nil, err
	}
	kept = true
	return t.close, nil
}

// fromCatalog lists the sessions the catalog names, trusting its census.
func (w *files) fromCatalog(ctx stdctx.Context, t *catalogTable, match func(updated int64, id, agent string) bool, add func(candidate)) error {
	var repairs []session.Summary
	live := 0
	var err error
	t.each(func(e entry) {
		switch {
		case err != nil:
		case e.kind == kindClosed:
			live++
			if match(e.updated, e.id, e.agent) {
				add(candidate{updated: e.updated, id: e.id, agent: e.agent, e: e})
			}
		case e.kind == kindOpen:
			// Held now, or its writer died: the log says.
			if err = ctx.Err(); err != nil {
				return
			}
			sum, ok := w.readLog(strings.Clone(e.id), &e)
			if !ok {
				return
			}
			live++
			if match(unixNano(sum.Updated), sum.ID, sum.Agent) {
				add(candidate{updated: unixNano(sum.Updated), id: sum.ID, agent: sum.Agent, sum: &sum})
			}
			if sum.State == session.StateIdle || sum.State == session.StateInterrupted {
				repairs = append(repairs, sum)
			}
		}
	})
	if err != nil {
		return err
	}
	if len(repairs) > 0 || t.lines > int64(2*live+compactSlack) {
		w.compactAfter(t, repairs)
	}
	return nil
}

// readLog describes a session from its log, counting the read.
func (w *files) readLog(id string, last *entry) (session.Summary, bool) {
	w.logReads.Add(1)
	s, _, ok := w.summarize(id, last)
	return s, ok
}

// reconcile lists the sessions the directory holds, and writes a census
// when the catalog names exactly those (with no line to repair, torn or
// garbled); otherwise it compacts the catalog, which the next listing
// then finds whole.
func (w *files) reconcile(ctx stdctx.Context, t *catalogTable, match func(updated int64, id, agent string) bool, add func(candidate),
	now, mtime int64, ino uint64) error {
	w.dirReads.Add(1)
	seen := make([]uint64, len(t.slots)/64+1)
	type toRead struct {
		id   string
		last *entry // its open line; nil for a log the catalog does not name
	}
	var reads []toRead
	unknown, live := 0, 0
	each := func(id []byte, h uint64) {
		if i := t.findHashed(h, id); i >= 0 {
			seen[i/64] |= 1 << (i % 64)
			// The filter first, from the head of the line: most lines
			// are not on the page and need nothing more.
			switch kind, updated, lid, agent, ok := t.headAt(t.slots[i]); {
			case ok && kind == kindClosed:
				live++
				if match(updated, lid, agent) {
					add(candidate{updated: updated, id: lid, agent: agent, e: t.entryAt(t.slots[i])})
				}
				return
			case ok && kind == kindOpen:
				open := t.entryAt(t.slots[i]) // only these escape
				reads = append(reads, toRead{string(id), &open})
				return
			}
		}
		// A misnamed file is never listed, so it needs no line: it must
		// not keep the census away.
		if s := string(id); session.ValidID(s) {
			unknown++
			reads = append(reads, toRead{id: s})
		} else {
			w.log.Warn("skipped a file that cannot be a session log: its name is not a session id", "file", filepath.Join(w.dir, s+".jsonl"))
		}
	}
	// The names go through the table in batches, their lookups' memory
	// loaded together first (prefetch): a name is valid only during its
	// call, so a batch copies them.
	const batch = 64
	var (
		arena [batch * 48]byte
		ends  [batch]int
		hs    [batch]uint64
		slots [batch]uint64
		n     int
	)
	flush := func() {
		t.prefetch(hs[:n], slots[:])
		start := 0
		for j := range n {
			each(arena[start:ends[j]], hs[j])
			start = ends[j]
		}
		n = 0
	}
	err := eachLogName(w.dir, func(id []byte) {
		start := 0
		if n > 0 {
			start = ends[n-1]
		}
		if start+len(id) > len(arena) {
			flush()
			start = 0
		}
		if len(id) > len(arena) {
			each(id, t.hash(id)) // longer than any session id: not one
			return
		}
		ends[n] = start + copy(arena[start:], id)
		hs[n] = t.hash(id)
		if n++; n == batch {
			flush()
		}
	})
	flush()
	if err != nil {
		return errs.Wrap(session.BadLog, err, fmt.Sprintf("session.jsonl: cannot read the session directory %s", w.dir))
	}
	var repairs []session.Summary
	for _, r := range reads {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, ok := w.readLog(r.id, r.last)
		if !ok {
			continue
		}
		live++
		if match(unixNano(s.Updated), r.id, s.Agent) {
			add(candidate{updated: unixNano(s.Updated), id: r.id, agent: s.Agent, sum: &s})
		}
		switch {
		case s.State == session.StateIdle || s.State == session.StateInterrupted:
			repairs = append(repairs, s)
		case s.State == session.StateCorrupt && r.last == nil:
			// An open line, so a census can name it: listings read it.
			repairs = append(repairs, s)
		}
	}
	// A closed line whose log is gone: removed by hand, or a delete whose
	// gone line did not make it.
	stale := 0
	for i, s := range t.slots {
		if s != 0 && seen[i/64]&(1<<(i%64)) == 0 && t.entryAt(s).kind == kindClosed {
			stale++
		}
	}
	if len(repairs) > 0 || stale > 0 || t.garbled > 0 || t.broken || t.lines > int64(2*live+compactSlack) {
		w.compactAfter(t, repairs)
		return nil
	}
	if unknown == 0 {
		w.writeCensus(t, now, mtime, ino)
	}
	return nil
}

func (w *files) compactAfter(t *catalogTable, repairs []session.Summary) {
	if err := w.compact(catalogFile{found: t.found, ino: t.ino, size: t.size}, repairs); err != nil {
		w.log.Warn("session.jsonl: cannot compact the catalog; listings read the logs it lacks until it is", "error", err)
	}
}

// writeCensus appends a census for the directory as it was at mtime, read
// at now, to the catalog t read — if it is still that file, with no line
// appended since, and the directory still has that mtime.
func (w *files) writeCensus(t *catalogTable, now, mtime int64, ino uint64) {
	if !t.found {
		return // creating the catalog would change the directory
	}
	path := filepath.Join(w.dir, catalogName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if lockFd(f, syscall.LOCK_EX) != nil || !samePath(f, path) {
		return // appends or a compaction under way: a later listing writes it
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() != t.size || fileIno(fi) != t.ino {
		return
	}
	if m, i, err := statDir(w.dir); err != nil || m != mtime || i != ino {
		return
	}
	c := census{mtime: mtime, ino: ino, lines: t.seg, crcs: t.crcs}
	if now < mtime+int64(w.margin()) {
		c.deadline = mtime + int64(w.margin())
	}
	f.Write(append([]byte{'\n'}, encodeCensus(c)...))
}

// margin is censusMargin, or what a test set.
func (w *files) margin() time.Duration {
	if w.censusMargin > 0 {
		return w.censusMargin
	}
	return censusMargin
}

func fileIno(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// openTable reads the catalog at path into a table; a missing catalog is
// empty.
func openTable(path string) (*catalogTable, error) {
	t := &catalogTable{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.scan()
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close() // a mapping outlives its descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	t.found, t.ino = true, fileIno(fi)
	if t.data, t.release, err = mapFile(f, int(fi.Size())); err != nil {
		return nil, err
	}
	scanned := false
	defer func() {
		if !scanned {
			t.close() // cut while scanned: the fault fails the listing
		}
	}()
	t.scan()
	scanned = true
	return t, nil
}

// compact rewrites the catalog with the last line of each session still
// stored, and a closed line for each of repairs: sessions a listing read
// from their logs, nobody holding them. A repair is dropped if any line
// of its session was appended since the listing read the catalog (cat):
// its writer may have changed the log after the listing read it. It gives
// up, leaving things as they were, when another compaction runs.
func (w *files) compact(cat catalogFile, repairs []session.Summary) error {
	path := filepath.Join(w.dir, catalogName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() // drops the lock, after the rename
	if err := lockFd(f, syscall.LOCK_EX); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil // another listing is at it
		}
		return err
	}
	if !samePath(f, path) {
		return nil // one just ended
	}
	now, err := readCatalogFrom(f)
	if err != nil {
		return err
	}
	// Read under the lock: a log created since has its open line in now.
	w.dirReads.Add(1)
	stored := map[string]struct{}{}
	if err := eachLogName(w.dir, func(id []byte) { stored[string(id)] = struct{}{} }); err != nil {
		return err
	}
	same := cat.found && cat.ino == now.ino
	apply := map[string]session.Summary{}
	for _, s := range repairs {
		e, seen := now.at(s.ID)
		switch {
		case !seen && (same || !cat.found): // still no line
		case seen && same && e.off < cat.size && e.kind == kindOpen: // only the dead writer's
		default:
			continue // a writer came since
		}
		apply[s.ID] = s
	}
	var buf bytes.Buffer
	var lines int64
	var crcs uint64
	named := make(map[string]struct{}, len(now.last))
	write := func(id string, line []byte) {
		sum, _ := checkLine(bytes.TrimSuffix(line, []byte{'\n'}))
		buf.Write(line)
		lines++
		crcs += uint64(sum)
		named[id] = struct{}{}
	}
	for id, i := range now.last {
		e := &now.entries[i]
		_, isStored := stored[id]
		_, repaired := apply[id]
		// An open line stays even without a log: its writer may be about
		// to create it.
		if e.kind == kindGone || e.kind == kindCensus || (e.kind == kindClosed && !isStored) || repaired {
			continue
		}
		write(id, append(e.raw[:len(e.raw):len(e.raw)], '\n'))
	}
	for _, s := range apply {
		if s.State == session.StateCorrupt {
			write(s.ID, encodeEntry(kindOpen, session.Summary{ID: s.ID})) // read from its log
			continue
		}
		write(s.ID, encodeEntry(kindClosed, s))
	}
	if err := atomicfile.Write(path, buf.Bytes(), 0, nil); err != nil {
		return err
	}
	if err := syncDir(f); err != nil {
		return err
	}
	// The new catalog names every log the directory held: a census for
	// the directory as the rename left it, with the margin's deadline, as
	// a writer's (withCensus) — a name changed by hand between the
	// reading of the names and the rename hides behind it.
	for id := range stored {
		if _, ok := named[id]; !ok && session.ValidID(id) {
			return nil
		}
	}
	w.censusAfterCompaction(path, int64(buf.Len()), lines, crcs)
	return nil
}

// censusAfterCompaction appends a census to the catalog a compaction just
// wrote, of size bytes and lines whose CRCs sum to crcs, if nothing was
// appended to it since.
func (w *files) censusAfterCompaction(path string, size, lines int64, crcs uint64) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if lockFd(f, syscall.LOCK_EX) != nil || !samePath(f, path) {
		return
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != size {
		return
	}
	mtime, ino, err := statDir(w.dir)
	if err != nil {
		return
	}
	f.Write(append([]byte{'\n'}, encodeCensus(census{mtime: mtime, ino: ino, deadline: mtime + int64(w.margin()), lines: lines, crcs: crcs})...))
}
