package session

import (
	stdctx "context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// Checkpointed records the workspace state a mutating tool call could
// change, taken before the call ran, and the state it left: Checkpoint
// holds it. The bytes live in the attachments store, by content; the
// event names them by reference. It is not part of the history.
const Checkpointed Type = "checkpoint"

// Rewound records a rewind: the workspace (Rewind.Code), the conversation
// (Rewind.Conversation) or both taken back to before a turn or step.
// Nothing is erased: the events it undid stay in the log, and the history
// derived from the log leaves out the ones a conversation rewind undid.
const Rewound Type = "rewind"

// Redone records a redo: the rewind at seq Rewind.Redo is undone, its
// workspace changes reversed and the conversation it took back restored.
const Redone Type = "redo"

// Codes of rewinds.
const (
	// RewindBadPoint: the turn or step to rewind to is not in the log, or
	// was undone by an earlier rewind.
	RewindBadPoint errs.Code = "REWIND_BAD_POINT"
	// NothingToRedo: no rewind can be redone — none was made, the last
	// was redone already, or a turn ran after it.
	NothingToRedo errs.Code = "REWIND_NOTHING_TO_REDO"
)

// Point names a place in a session to rewind to: before turn Turn, or,
// with Step > 0, before step Step of turn Turn.
type Point struct {
	Turn int `json:"turn"`
	Step int `json:"step,omitempty"`
}

// String writes "3" or "3.2".
func (p Point) String() string {
	if p.Step > 0 {
		return fmt.Sprintf("%d.%d", p.Turn, p.Step)
	}
	return strconv.Itoa(p.Turn)
}

// ParsePoint reads "TURN" or "TURN.STEP".
func ParsePoint(s string) (Point, error) {
	t, st, hasStep := strings.Cut(strings.TrimSpace(s), ".")
	var p Point
	var err error
	if p.Turn, err = strconv.Atoi(t); err != nil || p.Turn < 1 {
		return Point{}, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"rewind point %q is not TURN or TURN.STEP with numbers from 1 (as `/rewind` lists them), e.g. 3 or 3.2", s))
	}
	if hasStep {
		if p.Step, err = strconv.Atoi(st); err != nil || p.Step < 1 {
			return Point{}, errs.New(errs.InvalidArgument, fmt.Sprintf(
				"rewind point %q is not TURN or TURN.STEP with numbers from 1 (as `/rewind` lists them), e.g. 3 or 3.2", s))
		}
	}
	return p, nil
}

// Checkpoint is what a checkpoint event records (see Checkpointed).
type Checkpoint struct {
	// CallID and Tool name the call the checkpoint was taken for.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Workspace is the absolute workspace the paths are relative to.
	Workspace string `json:"workspace"`
	// Scope is "paths" (the call can change only Paths: the file tools)
	// or "workspace" (it can change anything in the workspace: bash and
	// tools not known to be read-only).
	Scope string   `json:"scope"`
	Paths []string `json:"paths,omitempty"`
	// Manifest is the reference of the manifest (the state before and
	// after the call, by path), Blobs those of the packs it points into.
	Manifest string   `json:"manifest"`
	Blobs    []string `json:"blobs,omitempty"`
	// Files and Bytes count what the before state covers; Stored the
	// bytes this checkpoint added to the store (the rest was stored by an
	// earlier one).
	Files  int   `json:"files"`
	Bytes  int64 `json:"bytes"`
	Stored int64 `json:"stored"`
	// Excluded is what the checkpoint does not cover and a rewind leaves
	// alone, with why; ExcludedMore counts entries past the list's cap.
	Excluded     []Exclusion `json:"excluded,omitempty"`
	ExcludedMore int         `json:"excluded_more,omitempty"`
	// Incomplete: the call did not end (the turn was aborted), so the
	// state after it was not recorded.
	Incomplete bool `json:"incomplete,omitempty"`
	// Took is how long taking the checkpoint cost, before and after the
	// call together.
	Took time.Duration `json:"took,omitempty"`
}

// Exclusion is one path a checkpoint leaves out, and why.
type Exclusion struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Rewind is what a rewind or redo event records.
type Rewind struct {
	// To is the point rewound to (a rewind).
	To Point `json:"to,omitzero"`
	// Code and Conversation say what was rewound.
	Code         bool `json:"code,omitempty"`
	Conversation bool `json:"conversation,omitempty"`
	// From and Through are the seqs of the events the conversation
	// rewind undid; 0 when the conversation was not rewound.
	From    int64 `json:"from,omitempty"`
	Through int64 `json:"through,omitempty"`
	// Redo is, for a redo event, the seq of the rewind it undoes.
	Redo int64 `json:"redo,omitempty"`
	// Manifest is the reference of the manifest of the workspace change:
	// the state before the rewind (what a redo restores) and after it;
	// Blobs the packs it points into.
	Manifest string   `json:"manifest,omitempty"`
	Blobs    []string `json:"blobs,omitempty"`
	// Restored, Removed and Created count the paths the code rewind
	// wrote back, deleted and recreated.
	Restored int `json:"restored,omitempty"`
	Removed  int `json:"removed,omitempty"`
	// Forced: the workspace had changed since the checkpoint and the
	// rewind went ahead anyway; Differed lists what differed.
	Forced   bool     `json:"forced,omitempty"`
	Differed []string `json:"differed,omitempty"`
	// By says who asked for it.
	By string `json:"by,omitempty"`
}

// span is a range of seqs a conversation rewind undid.
type span struct{ from, through, by int64 }

// undoneSpans returns the spans of events the active conversation
// rewinds of events[:n] undo: every rewind with Conversation, less those
// a later redo undid.
func undoneSpans(n int, at func(int) *Event) []span {
	var out []span
	for i := 0; i < n; i++ {
		e := at(i)
		if e.Rewind == nil {
			continue
		}
		switch e.Type {
		case Rewound:
			if e.Rewind.Conversation && e.Rewind.From > 0 {
				out = append(out, span{e.Rewind.From, e.Rewind.Through, e.Seq})
			}
		case Redone:
			for j := range out {
				if out[j].by == e.Rewind.Redo {
					out = append(out[:j], out[j+1:]...)
					break
				}
			}
		}
	}
	return out
}

func undoneIn(spans []span, seq int64) bool {
	for _, s := range spans {
		if seq >= s.from && seq <= s.through {
			return true
		}
	}
	return false
}

// rederive derives the history of events[:n] anew, leaving out what the
// active conversation rewinds undid.
func rederive(n int, at func(int) *Event) deriver {
	spans := undoneSpans(n, at)
	var d deriver
	for i := 0; i < n; i++ {
		e := at(i)
		if undoneIn(spans, e.Seq) {
			continue
		}
		d.apply(*e)
	}
	return d
}

// Visible returns the events of a log the conversation shows after its
// rewinds: those no active conversation rewind undid. Views that replay a
// log (a resumed terminal, an editor loading a session) show these.
func Visible(events []Event) []Event {
	spans := undoneSpans(len(events), func(i int) *Event { return &events[i] })
	if len(spans) == 0 {
		return events
	}
	out := make([]Event, 0, len(events))
	for _, e := range events {
		if !undoneIn(spans, e.Seq) {
			out = append(out, e)
		}
	}
	return out
}

// Undone reports whether the conversation rewinds of events undid seq.
func Undone(events []Event, seq int64) bool {
	return undoneIn(undoneSpans(len(events), func(i int) *Event { return &events[i] }), seq)
}

// PointSeq returns the seq at which p starts — its turn/start, or its
// step/start — and fails with RewindBadPoint when the log has no such
// turn or step, or a conversation rewind undid it.
func (s *Session) PointSeq(p Point) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pointSeq(p)
}

func (s *Session) pointSeq(p Point) (int64, error) {
	at := func(i int) *Event { return s.event(i) }
	for i := 0; i < s.n; i++ {
		e := at(i)
		if e.Turn != p.Turn {
			continue
		}
		if (p.Step == 0 && e.Type == TurnStart) || (p.Step > 0 && e.Type == StepStart && e.Step == p.Step) {
			if undoneIn(undoneSpans(s.n, at), e.Seq) {
				return 0, errs.New(RewindBadPoint, fmt.Sprintf(
					"turn %s was undone by an earlier rewind; /redo it first, or rewind to a turn the conversation still shows", p))
			}
			return e.Seq, nil
		}
	}
	what := "turn " + p.String()
	if p.Step > 0 {
		what = fmt.Sprintf("step %d of turn %d", p.Step, p.Turn)
	}
	return 0, errs.New(RewindBadPoint, fmt.Sprintf(
		"the session has no %s to rewind to; `/rewind` lists the turns and steps it has", what))
}

// AppendRewind records a rewind. With r.Conversation it undoes the
// conversation from the start of r.To to the log's end: the history
// derived from now on leaves those events out. The caller (the one that
// appends for the session, see Append) has restored the workspace when
// r.Code says so.
func (s *Session) AppendRewind(ctx stdctx.Context, r Rewind) (Event, error) {
	s.mu.Lock()
	from, err := s.pointSeq(r.To)
	if err != nil {
		s.mu.Unlock()
		return Event{}, err
	}
	if r.Conversation {
		r.From, r.Through = from, int64(s.n)
	}
	s.mu.Unlock()
	return s.Append(ctx, Event{Type: Rewound, Rewind: &r}), nil
}

// Redoable returns the rewind a redo would undo: the latest one not yet
// redone, when no turn started after it. It fails with NothingToRedo
// otherwise.
func (s *Session) Redoable() (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	redone := map[int64]bool{}
	for i := s.n - 1; i >= 0; i-- {
		e := s.event(i)
		switch e.Type {
		case TurnStart:
			return Event{}, errs.New(NothingToRedo, fmt.Sprintf(
				"nothing to redo: turn %d ran after the last rewind, so redoing it would mix two histories; rewind again instead", e.Turn))
		case Redone:
			if e.Rewind != nil {
				redone[e.Rewind.Redo] = true
			}
		case Rewound:
			if !redone[e.Seq] {
				return e.clone(), nil
			}
		}
	}
	return Event{}, errs.New(NothingToRedo, "nothing to redo: no rewind of this session is left to undo")
}

// AppendRedo records the redo of the rewind at seq r.Redo.
func (s *Session) AppendRedo(ctx stdctx.Context, r Rewind) Event {
	return s.Append(ctx, Event{Type: Redone, Rewind: &r})
}
