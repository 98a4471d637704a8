package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	st.doc.Schedules[name] = lastState{Last: t}
	raw, err := json.MarshalIndent(st.doc, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encoding the schedules' state")
	}
	if err := atomicfile.Write(st.path, append(raw, '\n'), 0, nil); err != nil {
		return errs.Wrap(StateFailed, err, fmt.Sprintf("cannot write the schedules' state %s", st.path))
	}
	return nil
}
