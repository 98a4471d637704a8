package checkpoints

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/services/session"
	"golang.org/x/sys/unix"
)

// Kinds of entries.
const (
	kindFile    = "f"
	kindDir     = "d"
	kindSymlink = "l"
	kindAbsent  = "-"
)

// entry is one path's state in a manifest: a file by content (hash, and
// where its bytes are stored), a directory, a symlink by target, or absent.
type entry struct {
	Path string      `json:"p"`
	Kind string      `json:"k"`
	Mode fs.FileMode `json:"m,omitempty"`
	Size int64       `json:"s,omitempty"`
	Hash string      `json:"h,omitempty"`
	Link string      `json:"l,omitempty"`
	// Blob and Off locate a file's bytes: Size bytes at Off in the pack
	// Blob names. A manifest writes Blob as BI, an index (from 1) into
	// its table of packs: a reference is 71 bytes, which would be most of
	// an entry.
	Blob string `json:"-"`
	BI   int    `json:"b,omitempty"`
	Off  int64  `json:"o,omitempty"`
	// MTime is a file's modification time (Unix ns), given back by a
	// rewind: build tools (make, go's test cache) judge a file by it.
	// It does not make two states differ.
	MTime int64 `json:"t,omitempty"`
}

// same reports whether two entries describe the same state (where the
// bytes are stored does not count).
func (e entry) same(o entry) bool {
	return e.Kind == o.Kind && e.Mode == o.Mode && e.Hash == o.Hash && e.Link == o.Link
}

// state is the state of a set of paths: with Full, of the whole
// workspace, so a path it does not list (and does not exclude) was
// absent.
type state struct {
	Full    bool    `json:"full,omitempty"`
	Entries []entry `json:"entries"`
	// Skipped are the paths a full state leaves out, SkippedDirs the
	// directories it did not enter (slash paths, relative).
	Skipped     []string `json:"skipped,omitempty"`
	SkippedDirs []string `json:"skipped_dirs,omitempty"`
}

// covers reports whether s says anything about p, and what.
func (s *state) lookup(p string) (entry, bool) {
	i, found := slices.BinarySearchFunc(s.Entries, p, byPath)
	if found {
		return s.Entries[i], true
	}
	if !s.Full || s.excludes(p) {
		return entry{}, false
	}
	return entry{Path: p, Kind: kindAbsent}, true
}

// excludes reports whether a full state left p out.
func (s *state) excludes(p string) bool {
	if slices.Contains(s.Skipped, p) {
		return true
	}
	for _, d := range s.SkippedDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// manifest is what a checkpoint or a rewind stores: the state before and
// after.
type manifest struct {
	Before state `json:"before"`
	After  state `json:"after"`
	// Packs is the table entries' BI index (encode and decode fill it).
	Packs []string `json:"packs,omitempty"`
}

// delta is how a manifest writes an after-state of the whole workspace:
// what differs from the before-state, since a command changes a few of
// the workspace's files.
type delta struct {
	Changed     []entry  `json:"changed,omitempty"`
	Removed     []string `json:"removed,omitempty"`
	Skipped     []string `json:"skipped,omitempty"`
	SkippedDirs []string `json:"skipped_dirs,omitempty"`
}

// wire is a manifest as stored.
type wire struct {
	Before state    `json:"before"`
	After  *state   `json:"after,omitempty"`
	Delta  *delta   `json:"delta,omitempty"`
	Packs  []string `json:"packs,omitempty"`
}

// encode writes m: pack references by index, a full after-state as a
// delta from a full before-state.
func (m manifest) encode() ([]byte, error) {
	index := map[string]int{}
	var packs []string
	number := func(s state) state {
		s.Entries = slices.Clone(s.Entries)
		for i := range s.Entries {
			e := &s.Entries[i]
			if e.Blob == "" {
				continue
			}
			if _, ok := index[e.Blob]; !ok {
				packs = append(packs, e.Blob)
				index[e.Blob] = len(packs)
			}
			e.BI = index[e.Blob]
		}
		return s
	}
	w := wire{Before: number(m.Before)}
	after := number(m.After)
	if m.Before.Full && after.Full {
		d := &delta{Skipped: after.Skipped, SkippedDirs: after.SkippedDirs}
		for _, e := range after.Entries {
			if old, ok := m.Before.lookup(e.Path); !ok || !old.same(e) || old.Kind == kindAbsent {
				d.Changed = append(d.Changed, e)
			}
		}
		for _, e := range m.Before.Entries {
			if _, ok := slices.BinarySearchFunc(after.Entries, e.Path, byPath); !ok {
				d.Removed = append(d.Removed, e.Path)
			}
		}
		w.Delta = d
	} else {
		w.After = &after
	}
	w.Packs = packs
	return json.Marshal(w)
}

func byPath(e entry, p string) int { return strings.Compare(e.Path, p) }

// decodeManifest reads what encode wrote.
func decodeManifest(data []byte) (*manifest, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, err
	}
	resolve := func(s *state) error {
		for i := range s.Entries {
			e := &s.Entries[i]
			if e.BI == 0 {
				continue
			}
			if e.BI < 0 || e.BI > len(w.Packs) {
				return fmt.Errorf("entry %s names pack %d of %d", e.Path, e.BI, len(w.Packs))
			}
			e.Blob = w.Packs[e.BI-1]
		}
		return nil
	}
	m := &manifest{Before: w.Before, Packs: w.Packs}
	if err := resolve(&m.Before); err != nil {
		return nil, err
	}
	switch {
	case w.After != nil:
		m.After = *w.After
	case w.Delta != nil:
		m.After = state{Full: true, Skipped: w.Delta.Skipped, SkippedDirs: w.Delta.SkippedDirs}
		changed := map[string]entry{}
		for _, e := range w.Delta.Changed {
			changed[e.Path] = e
		}
		removed := map[string]bool{}
		for _, p := range w.Delta.Removed {
			removed[p] = true
		}
		for _, e := range m.Before.Entries {
			if c, ok := changed[e.Path]; ok {
				m.After.Entries = append(m.After.Entries, c)
				delete(changed, e.Path)
			} else if !removed[e.Path] {
				m.After.Entries = append(m.After.Entries, e)
			}
		}
		for _, e := range changed {
			m.After.Entries = append(m.After.Entries, e)
		}
		slices.SortFunc(m.After.Entries, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	}
	return m, resolve(&m.After)
}

// indexed is what the index remembers of a file: enough to tell it has
// not changed without reading it.
type indexed struct {
	size, mtime int64
	ino         uint64
	mode        fs.FileMode
	hash        string
}

// loc is where a content is stored.
type loc struct {
	blob string
	off  int64
}

// taker takes states of one workspace, for one session: it keeps the
// index of the files it saw and where each content is stored, so a
// snapshot reads only what changed and stores each content once.
type taker struct {
	ws   string
	cfg  Config
	put  func([]byte) (string, error)
	idx  map[string]indexed
	locs map[string]loc
	// when is the time of the last walk: a file changed within the
	// clock's granularity of it is read again whatever its stat says.
	when time.Time
}

// pack collects the bytes of new contents into blobs of up to
// Config.PackBytes; entries learn where their bytes went from the
// taker's locations once it is flushed (resolve).
type pack struct {
	t       *taker
	buf     bytes.Buffer
	pending map[string]int64 // hash -> offset in buf
	stored  int64
}

func (p *pack) add(hash string, data []byte) error {
	if _, ok := p.t.locs[hash]; ok {
		return nil
	}
	if _, ok := p.pending[hash]; ok {
		return nil
	}
	if p.pending == nil {
		p.pending = map[string]int64{}
	}
	p.pending[hash] = int64(p.buf.Len())
	p.buf.Write(data)
	if p.buf.Len() >= p.t.cfg.PackBytes {
		return p.flush()
	}
	return nil
}

// flush stores the pending bytes as one blob.
func (p *pack) flush() error {
	if p.buf.Len() == 0 {
		return nil
	}
	ref, err := p.t.put(p.buf.Bytes())
	if err != nil {
		return err
	}
	p.stored += int64(p.buf.Len())
	for h, off := range p.pending {
		p.t.locs[h] = loc{ref, off}
	}
	clear(p.pending)
	p.buf.Reset()
	return nil
}

// resolve sets where the bytes of each file entry of s are stored.
func (t *taker) resolve(s *state) {
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Kind == kindFile {
			l := t.locs[e.Hash]
			e.Blob, e.Off = l.blob, l.off
		}
	}
}

// usedBlobs returns the packs the entries point into.
func usedBlobs(states ...state) []string {
	var out []string
	for _, s := range states {
		for _, e := range s.Entries {
			if e.Blob != "" && !slices.Contains(out, e.Blob) {
				out = append(out, e.Blob)
			}
		}
	}
	return out
}

// rel returns p (absolute or relative to the workspace) as a clean slash
// path relative to it, or ok false when it lies outside.
func (t *taker) rel(p string) (string, bool) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.ws, p)
	}
	r, err := filepath.Rel(t.ws, filepath.Clean(p))
	if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// skipDir reports whether the walk leaves directory rel out.
func (t *taker) skipDir(rel string) bool {
	if path.Base(rel) == ".git" {
		return true
	}
	return t.cfg.matches(rel)
}

// walk takes the state of the whole workspace. It reads each directory
// once (getdents gives the entries' types) and stats each entry relative
// to its directory's descriptor, into one reused Stat_t: a workspace of
// 10,000 files is 10,000 fstatat calls and little else.
func (t *taker) walk(p *pack, ex *exclusions) (state, error) {
	// The last walk's count is a good guess of this one's.
	st := state{Full: true, Entries: make([]entry, 0, len(t.idx)+64)}
	started := time.Now()
	var total int64
	var sys unix.Stat_t
	var dir func(abs, rel string) error
	dir = func(abs, rel string) error {
		f, err := os.Open(abs)
		if err != nil {
			if rel == "" {
				return err
			}
			st.SkippedDirs = append(st.SkippedDirs, rel)
			ex.add(rel+"/", "cannot be read: "+err.Error())
			return nil
		}
		names, err := f.Readdirnames(-1)
		if err != nil {
			f.Close()
			if rel == "" {
				return err
			}
			st.SkippedDirs = append(st.SkippedDirs, rel)
			ex.add(rel+"/", "cannot be read: "+err.Error())
			return nil
		}
		fd := int(f.Fd())
		var subdirs []string
		for _, name := range names {
			r := name
			if rel != "" {
				r = rel + "/" + name
			}
			if err := unix.Fstatat(fd, name, &sys, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if !errors.Is(err, syscall.ENOENT) {
					st.Skipped = append(st.Skipped, r)
					ex.add(r, "cannot be read: "+err.Error())
				}
				continue
			}
			if uint32(sys.Mode)&syscall.S_IFMT == syscall.S_IFDIR {
				if t.skipDir(r) {
					st.SkippedDirs = append(st.SkippedDirs, r)
					ex.add(r+"/", t.why(r))
					continue
				}
				st.Entries = append(st.Entries, entry{Path: r, Kind: kindDir, Mode: fileMode(uint32(sys.Mode))})
				subdirs = append(subdirs, name)
				continue
			}
			if t.cfg.matches(r) {
				st.Skipped = append(st.Skipped, r)
				ex.add(r, "matches an exclude glob")
				continue
			}
			e, why, err := t.fromStat(p, r, abs+"/"+name, &sys, &total)
			if err != nil {
				f.Close()
				return err
			}
			if why != "" {
				st.Skipped = append(st.Skipped, r)
				ex.add(r, why)
				continue
			}
			st.Entries = append(st.Entries, e)
		}
		f.Close()
		for _, name := range subdirs {
			r := name
			if rel != "" {
				r = rel + "/" + name
			}
			if err := dir(abs+"/"+name, r); err != nil {
				return err
			}
		}
		return nil
	}
	err := dir(t.ws, "")
	t.when = started
	// Lookups want path order ("a/b" sorts after "a.txt").
	slices.SortFunc(st.Entries, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	return st, err
}

// fileMode is the permission bits of a stat mode as fs.FileMode writes
// them.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func (t *taker) why(rel string) string {
	if path.Base(rel) == ".git" {
		return "git's own directory"
	}
	return "matches an exclude glob"
}

// missingParents are the directories above rel that do not exist, from
// the deepest: a write makes them, so a rewind must take them away again.
func (t *taker) missingParents(rel string) []string {
	var missing []string
	for dir := path.Dir(rel); dir != "." && dir != "/"; dir = path.Dir(dir) {
		var sys unix.Stat_t
		err := unix.Lstat(filepath.Join(t.ws, filepath.FromSlash(dir)), &sys)
		if !errors.Is(err, syscall.ENOENT) {
			break
		}
		missing = append(missing, dir)
	}
	return missing
}

// paths takes the state of the given paths alone.
func (t *taker) paths(p *pack, ex *exclusions, rels []string) (state, error) {
	var st state
	var total int64
	for _, rel := range rels {
		e, why, err := t.stat(p, rel, &total)
		if err != nil {
			return state{}, err
		}
		if why != "" {
			ex.add(rel, why)
			continue
		}
		st.Entries = append(st.Entries, e)
	}
	slices.SortFunc(st.Entries, func(a, b entry) int { return strings.Compare(a.Path, b.Path) })
	st.Entries = slices.CompactFunc(st.Entries, func(a, b entry) bool { return a.Path == b.Path })
	return st, nil
}

// stat takes one path's state; why says why it is left out.
func (t *taker) stat(p *pack, rel string, total *int64) (entry, string, error) {
	abs := filepath.Join(t.ws, filepath.FromSlash(rel))
	var sys unix.Stat_t
	err := unix.Lstat(abs, &sys)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return entry{Path: rel, Kind: kindAbsent}, "", nil
	}
	if err != nil {
		return entry{}, "cannot be read: " + err.Error(), nil
	}
	if uint32(sys.Mode)&syscall.S_IFMT == syscall.S_IFDIR {
		return entry{Path: rel, Kind: kindDir, Mode: fileMode(uint32(sys.Mode))}, "", nil
	}
	return t.fromStat(p, rel, abs, &sys, total)
}

// fromStat takes the state of the file, symlink or other non-directory
// at abs, whose lstat is sys.
func (t *taker) fromStat(p *pack, rel, abs string, sys *unix.Stat_t, total *int64) (entry, string, error) {
	e := entry{Path: rel, Mode: fileMode(uint32(sys.Mode))}
	var err error
	switch uint32(sys.Mode) & syscall.S_IFMT {
	case syscall.S_IFLNK:
		e.Kind = kindSymlink
		if e.Link, err = os.Readlink(abs); err != nil {
			return entry{}, "cannot be read: " + err.Error(), nil
		}
		return e, "", nil
	case syscall.S_IFREG:
	default:
		return entry{}, "not a regular file, directory or symlink", nil
	}
	e.Kind, e.Size = kindFile, sys.Size
	if e.Size > t.cfg.MaxFileBytes {
		return entry{}, fmt.Sprintf("%d bytes, over max_file_bytes (%d)", e.Size, t.cfg.MaxFileBytes), nil
	}
	if *total+e.Size > t.cfg.MaxTotalBytes {
		return entry{}, fmt.Sprintf("past max_total_bytes (%d) of this checkpoint", t.cfg.MaxTotalBytes), nil
	}
	*total += e.Size
	ino := sys.Ino
	mtime := sys.Mtim.Nano()
	e.MTime = mtime
	if old, ok := t.idx[rel]; ok && old.size == e.Size && old.mtime == mtime && old.ino == ino &&
		mtime < t.when.Add(-2*time.Second).UnixNano() {
		if _, ok := t.locs[old.hash]; ok {
			// Unchanged since it was stored: nothing to read.
			e.Hash = old.hash
			return e, "", nil
		}
	}
	data, err := readFile(abs, e.Size)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return entry{Path: rel, Kind: kindAbsent}, "", nil
		}
		return entry{}, "cannot be read: " + err.Error(), nil
	}
	e.Size = int64(len(data))
	sum := sha256.Sum256(data)
	e.Hash = hex.EncodeToString(sum[:])
	t.idx[rel] = indexed{size: e.Size, mtime: mtime, ino: ino, mode: e.Mode, hash: e.Hash}
	return e, "", p.add(e.Hash, data)
}

// readFile reads a file without following a symlink swapped in since it
// was looked at.
func readFile(abs string, size int64) ([]byte, error) {
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	_, err = io.Copy(buf, f)
	return buf.Bytes(), err
}

// exclusions collects what a checkpoint leaves out, for its record.
type exclusions struct {
	list []session.Exclusion
	more int
	seen map[string]bool
}

// maxListed caps the exclusions a record lists.
const maxListed = 50

func (x *exclusions) add(p, why string) {
	if x.seen == nil {
		x.seen = map[string]bool{}
	}
	if x.seen[p] {
		return
	}
	x.seen[p] = true
	if len(x.list) >= maxListed {
		x.more++
		return
	}
	x.list = append(x.list, session.Exclusion{Path: p, Reason: why})
}
