package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/atomicfile"
)

// StateFile is the file in the state directory that keeps the schedules'
// last runs.
const StateFile = "schedules.json"

// StateFailed: the state directory or file cannot be read or written.
const StateFailed errs.Code = "SCHEDULE_STATE_FAILED"

// stateDoc is the state file: per schedule, the latest scheduled time
// already accounted for (run, skipped, or found missed at a start).
type stateDoc struct {
	Version   int                  `json:"version"`
	Schedules map[string]lastState `json:"schedules"`
}

type lastState struct {
	Last time.Time `json:"last"`
	// Pending are the runs recorded to be delivered whose turn has not
	// ended yet: the one running and the one queued behind it. A run
	// waits in memory (queued, or in the agent's inbox) until its turn's
	// first checkpoint puts it in a log, so a crash leaves it here, and
	// the next start with catch_up delivers the latest again under its
	// request id (its session answers from its log if it took it).
	Pending []time.Time `json:"pending,omitempty"`
}

// state is the state file, kept in memory and written whole on change.
type state struct {
	path string
	mu   sync.Mutex
	doc  stateDoc
}

// openState makes dir (0700) and reads its state file; a missing file is
// an empty state.
func openState(dir string) (*state, error) {
	if dir == "" {
		return nil, errs.New(errs.InvalidArgument, "schedule.New: StateDir is empty; pass the directory that keeps the schedules' last runs (serve.state_dir)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errs.Wrap(StateFailed, err, fmt.Sprintf("cannot create the state directory %s; check its parent's permissions or set serve.state_dir", dir))
	}
	st := &state{path: filepath.Join(dir, StateFile), doc: stateDoc{Version: 1, Schedules: map[string]lastState{}}}
	raw, err := os.ReadFile(st.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return nil, errs.Wrap(StateFailed, err, fmt.Sprintf("cannot read the schedules' state %s", st.path))
	}
	if err := json.Unmarshal(raw, &st.doc); err != nil || st.doc.Version != 1 {
		return nil, errs.New(StateFailed, fmt.Sprintf(
			"the schedules' state %s is not a state file of this dsh (%v); remove it to start over (runs missed meanwhile are then not detected)", st.path, err))
	}
	if st.doc.Schedules == nil {
		st.doc.Schedules = map[string]lastState{}
	}
	return st, nil
}

// last returns the latest scheduled time accounted for of schedule name.
func (st *state) last(name string) (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l, ok := st.doc.Schedules[name]
	return l.Last, ok
}

// record sets name's last time and writes the file: to a temporary file
// in the same directory, synced, then renamed over the old one, so a crash
// leaves the old state or the new, never a torn one.
func (st *state) record(name string, t time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	l := st.doc.Schedules[name]
	l.Last = t
	st.doc.Schedules[name] = l
	return st.write()
}

// pending returns name's runs recorded to be delivered whose turn has not
// ended, oldest first.
func (st *state) pending(name string) []time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.doc.Schedules[name].Pending)
}

// mark adds t to name's pending runs and writes the file: before the run
// can reach an inbox or wait in the queue.
func (st *state) mark(name string, t time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	l := st.doc.Schedules[name]
	if slices.ContainsFunc(l.Pending, t.Equal) {
		return nil
	}
	l.Pending = append(l.Pending, t)
	slices.SortFunc(l.Pending, time.Time.Compare)
	st.doc.Schedules[name] = l
	return st.write()
}

// settle removes the pending runs at or before t (all when t is zero):
// their turns ended, or they will not be delivered again.
func (st *state) settle(name string, t time.Time) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	l := st.doc.Schedules[name]
	n := len(l.Pending)
	l.Pending = slices.DeleteFunc(l.Pending, func(p time.Time) bool { return t.IsZero() || !p.After(t) })
	if len(l.Pending) == n {
		return nil
	}
	if len(l.Pending) == 0 {
		l.Pending = nil
	}
	st.doc.Schedules[name] = l
	return st.write()
}

// write replaces the file with the state; st.mu is held.
func (st *state) write() error {
	raw, err := json.MarshalIndent(st.doc, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encoding the schedules' state")
	}
	if err := atomicfile.Write(st.path, append(raw, '\n'), 0, nil); err != nil {
		return errs.Wrap(StateFailed, err, fmt.Sprintf("cannot write the schedules' state %s", st.path))
	}
	// The rename is durable once the directory is: a run is marked
	// pending before it is delivered, and the mark must outlive a crash.
	dir, err := os.Open(filepath.Dir(st.path))
	if err == nil {
		err = errors.Join(dir.Sync(), dir.Close())
	}
	if err != nil {
		return errs.Wrap(StateFailed, err, fmt.Sprintf("cannot sync the directory of the schedules' state %s", st.path))
	}
	return nil
}
