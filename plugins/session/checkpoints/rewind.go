package checkpoints

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/atomicfile"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// record is a checkpoint, rewind or redo event with its manifest.
type record struct {
	ev       session.Event
	manifest string
}

func records(events []session.Event) []record {
	var out []record
	for _, e := range events {
		switch {
		case e.Type == session.Checkpointed && e.Checkpoint != nil && e.Checkpoint.Manifest != "":
			out = append(out, record{e, e.Checkpoint.Manifest})
		case (e.Type == session.Rewound || e.Type == session.Redone) && e.Rewind != nil && e.Rewind.Manifest != "":
			out = append(out, record{e, e.Rewind.Manifest})
		}
	}
	return out
}

// manifests reads manifests from the store, each once.
type manifests struct {
	store *attachments.Store
	read  map[string]*manifest
}

func (m *manifests) get(ref string) (*manifest, error) {
	if got, ok := m.read[ref]; ok {
		return got, nil
	}
	data, err := m.store.Get(ref)
	if err != nil {
		return nil, errs.Wrap(Damaged, err, fmt.Sprintf("the checkpoint manifest %s cannot be read from the attachments store; the checkpoint is lost", ref))
	}
	got, err := decodeManifest(data)
	if err != nil {
		return nil, errs.Wrap(Damaged, err, fmt.Sprintf("the checkpoint manifest %s is not a manifest this dsh reads", ref))
	}
	if m.read == nil {
		m.read = map[string]*manifest{}
	}
	m.read[ref] = got
	return got, nil
}

// change is one path a rewind sets from cur to want.
type change struct {
	path      string
	cur, want entry
}

// rewind answers session/rewind: the code, and the conversation with it.
func (p *checkpointer) rewind(ctx stdctx.Context, c sessions.RewindCall, next sessions.RewindNext) (sessions.RewindResult, error) {
	r := c.Request
	log := c.Agent.Session()
	if r.Redo {
		ev, err := log.Redoable()
		if err != nil {
			return sessions.RewindResult{}, err
		}
		if !ev.Rewind.Code {
			return next.Call(ctx, c)
		}
		r.Code, r.Conversation = true, ev.Rewind.Conversation
	}
	if !r.Code {
		return next.Call(ctx, c)
	}
	w, ok := c.Agent.(workspaced)
	if !ok {
		return next.Call(ctx, c)
	}
	st, err := p.state(c.Agent, w.Workspace())
	if err != nil {
		return sessions.RewindResult{}, err
	}
	defer st.mu.Unlock()
	store, err := attachments.Key.Get(c.Agent.Context())
	if err != nil {
		return sessions.RewindResult{}, err
	}
	t := st.t
	ms := &manifests{store: store}
	all := records(log.Events(1))

	// The state to go back to, by path; full is the first workspace
	// snapshot on the way, which speaks for every path it does not leave
	// out.
	want := map[string]entry{}
	var full *state
	var redoOf int64
	if r.Redo {
		ev, _ := log.Redoable()
		redoOf = ev.Seq
		m, err := ms.get(ev.Rewind.Manifest)
		if err != nil {
			return sessions.RewindResult{}, err
		}
		for _, e := range m.Before.Entries {
			want[e.Path] = e
		}
	} else {
		from, err := log.PointSeq(r.To)
		if err != nil {
			return sessions.RewindResult{}, err
		}
		for _, rec := range all {
			if rec.ev.Seq < from {
				continue
			}
			if c := rec.ev.Checkpoint; c != nil && c.Workspace != t.ws {
				return sessions.RewindResult{}, errs.New(errs.InvalidArgument, fmt.Sprintf(
					"the checkpoint at seq %d was taken of the workspace %s, and the session now works in %s; resume it with its old workspace to rewind its code, or rewind the conversation alone",
					rec.ev.Seq, c.Workspace, t.ws))
			}
			m, err := ms.get(rec.manifest)
			if err != nil {
				return sessions.RewindResult{}, err
			}
			for _, e := range m.Before.Entries {
				if _, ok := want[e.Path]; !ok {
					want[e.Path] = e
				}
			}
			if m.Before.Full {
				full = &m.Before
				break
			}
		}
	}

	// What is there now: the whole workspace when a snapshot speaks for
	// it, else the paths to set. Contents new since the last checkpoint
	// are stored on the way, for a redo.
	pk := &pack{t: t}
	var ex exclusions
	var now state
	if full != nil {
		now, err = t.walk(pk, &ex)
	} else {
		now, err = t.paths(pk, &ex, slices.Sorted(mapsKeys(want)))
	}
	if err != nil {
		return sessions.RewindResult{}, errs.Wrap(errs.Internal, err, "rewind: the workspace cannot be read")
	}
	paths := map[string]bool{}
	for p := range want {
		paths[p] = true
	}
	if full != nil {
		for _, e := range now.Entries {
			paths[e.Path] = true
		}
	}
	var changes []change
	for p := range paths {
		target, ok := want[p]
		if !ok {
			if target, ok = full.lookup(p); !ok {
				continue // the snapshot left it out: not ours to touch
			}
		}
		cur, ok := now.lookup(p)
		if !ok {
			if now.Full {
				continue // left out now (grew past a bound): left alone
			}
			cur = entry{Path: p, Kind: kindAbsent}
		}
		if !cur.same(target) {
			changes = append(changes, change{path: p, cur: cur, want: target})
		}
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.path, b.path) })

	// What the session's last checkpoint of each path left: a path that
	// is not so was changed underneath.
	var differs []string
	for _, ch := range changes {
		exp, known, err := lastAfter(all, ms, ch.path)
		if err != nil {
			return sessions.RewindResult{}, err
		}
		if known && !exp.same(ch.cur) {
			differs = append(differs, describe(ch.path, exp, ch.cur))
		}
	}
	if len(differs) > 0 && !r.Force {
		e := errs.New(sessions.WorkspaceChanged, fmt.Sprintf(
			"the workspace changed since the checkpoint, and rewinding would overwrite it:\n  %s\nkeep those changes elsewhere first, or rewind with --force to overwrite them",
			strings.Join(differs, "\n  ")))
		e.Details = map[string]any{"differs": differs}
		return sessions.RewindResult{}, e
	}
	if err := pk.flush(); err != nil {
		return sessions.RewindResult{}, err
	}
	t.resolve(&now)

	var before, after state
	for _, ch := range changes {
		if e, ok := now.lookup(ch.path); ok {
			before.Entries = append(before.Entries, e)
		} else {
			before.Entries = append(before.Entries, ch.cur)
		}
		after.Entries = append(after.Entries, ch.want)
	}
	restored, removed, err := apply(t.ws, store, changes)
	if err != nil {
		return sessions.RewindResult{}, err
	}
	data, err := manifest{Before: before, After: after}.encode()
	if err != nil {
		return sessions.RewindResult{}, errs.Wrap(errs.Internal, err, "rewind: the manifest cannot be encoded")
	}
	ref, err := t.put(data)
	if err != nil {
		return sessions.RewindResult{}, err
	}
	rec := session.Rewind{To: r.To, Code: true, Conversation: r.Conversation, Manifest: ref, Blobs: usedBlobs(before, after),
		Restored: restored, Removed: removed, Forced: len(differs) > 0, Differed: differs, By: c.By}
	if r.Redo {
		rec.To, rec.Redo = session.Point{}, redoOf
		return sessions.RewindResult{Event: log.AppendRedo(ctx, rec)}, nil
	}
	ev, err := log.AppendRewind(ctx, rec)
	return sessions.RewindResult{Event: ev}, err
}

func mapsKeys(m map[string]entry) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// lastAfter returns the state the last record that speaks of p left it
// in; known is false when none does.
func lastAfter(all []record, ms *manifests, p string) (entry, bool, error) {
	for i := len(all) - 1; i >= 0; i-- {
		m, err := ms.get(all[i].manifest)
		if err != nil {
			return entry{}, false, err
		}
		if e, ok := m.After.lookup(p); ok {
			return e, true, nil
		}
		if m.Before.Full || slices.ContainsFunc(m.Before.Entries, func(e entry) bool { return e.Path == p }) {
			// The call spoke of p but did not end: what it left is
			// unknown.
			return entry{}, false, nil
		}
	}
	return entry{}, false, nil
}

// describe says how p differs from what the last checkpoint left.
func describe(p string, exp, cur entry) string {
	switch {
	case exp.Kind == kindAbsent:
		return p + ": created since"
	case cur.Kind == kindAbsent:
		return p + ": deleted since"
	case exp.Kind != cur.Kind:
		return p + ": replaced by a " + kindName(cur.Kind)
	case exp.Mode != cur.Mode && exp.Hash == cur.Hash && exp.Link == cur.Link:
		return fmt.Sprintf("%s: mode changed since (%v, was %v)", p, cur.Mode, exp.Mode)
	}
	return p + ": changed since"
}

func kindName(k string) string {
	switch k {
	case kindDir:
		return "directory"
	case kindSymlink:
		return "symlink"
	}
	return "file"
}

// apply makes the workspace hold the wanted states: first what goes away
// (files, then directories from the deepest), then directories, files
// and symlinks, then the modes of directories.
func apply(ws string, store *attachments.Store, changes []change) (restored, removed int, err error) {
	abs := func(p string) string { return filepath.Join(ws, filepath.FromSlash(p)) }
	var dirs []change
	for _, ch := range changes {
		if ch.cur.Kind == kindAbsent || (ch.cur.Kind == ch.want.Kind && ch.cur.Kind != kindSymlink) {
			continue
		}
		if ch.cur.Kind == kindDir {
			dirs = append(dirs, ch)
			continue
		}
		if err := os.Remove(abs(ch.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return restored, removed, errs.Wrap(errs.Internal, err, "rewind: cannot remove "+ch.path)
		}
		if ch.want.Kind == kindAbsent {
			removed++
		}
	}
	slices.SortFunc(dirs, func(a, b change) int { return strings.Count(b.path, "/") - strings.Count(a.path, "/") })
	for _, ch := range dirs {
		if err := os.Remove(abs(ch.path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return restored, removed, errs.Wrap(errs.Internal, err, fmt.Sprintf(
				"rewind: cannot remove the directory %s, which holds what the checkpoint left out; move it aside and rewind again", ch.path))
		}
		if ch.want.Kind == kindAbsent {
			removed++
		}
	}
	var dirModes []change
	for _, ch := range changes {
		switch ch.want.Kind {
		case kindDir:
			if err := os.MkdirAll(abs(ch.path), 0o700); err != nil {
				return restored, removed, errs.Wrap(errs.Internal, err, "rewind: cannot make the directory "+ch.path)
			}
			dirModes = append(dirModes, ch)
		case kindFile:
			if err := writeFile(abs(ch.path), store, ch.want); err != nil {
				return restored, removed, err
			}
			restored++
		case kindSymlink:
			if err := os.MkdirAll(filepath.Dir(abs(ch.path)), 0o755); err != nil {
				return restored, removed, errs.Wrap(errs.Internal, err, "rewind: cannot make the directory of "+ch.path)
			}
			if err := os.Symlink(ch.want.Link, abs(ch.path)); err != nil {
				return restored, removed, errs.Wrap(errs.Internal, err, "rewind: cannot make the symlink "+ch.path)
			}
			restored++
		}
	}
	for _, ch := range dirModes {
		if err := os.Chmod(abs(ch.path), ch.want.Mode); err != nil {
			return restored, removed, errs.Wrap(errs.Internal, err, "rewind: cannot set the mode of "+ch.path)
		}
		if ch.cur.Kind == kindAbsent {
			restored++
		}
	}
	return restored, removed, nil
}

// writeFile writes a file's stored content in place of what is there,
// through a temporary file and a rename, with its mode.
func writeFile(abs string, store *attachments.Store, e entry) error {
	blob, err := store.Get(e.Blob)
	if err != nil {
		return errs.Wrap(Damaged, err, fmt.Sprintf("rewind: the stored content of %s (%s) is missing", e.Path, e.Blob))
	}
	if e.Off < 0 || e.Off+e.Size > int64(len(blob)) {
		return errs.New(Damaged, fmt.Sprintf("rewind: the stored content of %s lies outside its pack %s", e.Path, e.Blob))
	}
	data := blob[e.Off : e.Off+e.Size]
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != e.Hash {
		return errs.New(Damaged, fmt.Sprintf("rewind: the stored content of %s does not match its digest; the store is damaged", e.Path))
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return errs.Wrap(errs.Internal, err, "rewind: cannot make the directory of "+e.Path)
	}
	err = atomicfile.Write(abs, data, 0, func(tmp string) error {
		if err := os.Chmod(tmp, e.Mode); err != nil || e.MTime == 0 {
			return err
		}
		t := time.Unix(0, e.MTime)
		return os.Chtimes(tmp, t, t)
	})
	if err != nil {
		return errs.Wrap(errs.Internal, err, "rewind: cannot write "+e.Path)
	}
	return nil
}
