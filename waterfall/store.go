package waterfall

import (
	stdctx "context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// Option changes how a listener is registered.
type Option uint8

const (
	// Prepend puts the listener before every listener registered so far.
	Prepend Option = 1 << iota
	// Global makes a listener registered through a scope hear events of every
	// tag, as if it had been registered outside any scope. It still belongs
	// to the scope's fiber and goes away with it.
	Global
)

// entry is one registered listener. Listeners run in (key, seq) order:
// seq is the registration's tick of the clock, negative for a prepended
// one; key is the ordering key of its fiber (context.Fiber.Order) or, for
// a fiber without one and for a prepended listener, seq itself — so
// without keys this is registration order, prepended ones first.
type entry[L any] struct {
	fn    L
	key   int64
	seq   int64
	fiber *dshctx.Fiber
}

// before reports whether e runs before o.
func (e *entry[L]) before(o *entry[L]) bool {
	return e.key < o.key || e.key == o.key && e.seq < o.seq
}

// clock orders listeners across all stores and events: registration seqs
// and the keys Position hands out are its ticks, so a key compares with
// any registration. It steps by clockStep to leave room for keys between
// two neighbours (Between).
var clock atomic.Int64

const clockStep = 1 << 10

// Position returns a fresh ordering key for context.Context.PluginAt: the
// listeners of a fiber created with it run after every listener registered
// before the call and before every one registered after it without a key,
// whenever they register. A host takes one per configured root entry, in
// config order, and passes it again when it re-applies the entry.
func Position() int64 { return clock.Add(clockStep) }

// Between returns a key strictly between lo and hi, for an entry a host
// inserts between two that keep running; ok is false when there is no
// room, and the caller then takes a fresh Position.
func Between(lo, hi int64) (key int64, ok bool) {
	if hi-lo < 2 {
		return 0, false
	}
	return lo + (hi-lo)/2, true
}

type list[L any] struct{ entries []entry[L] }

// store holds one event's listeners for one tree. Dispatch reads immutable
// snapshots through atomic pointers and never locks; registration copies the
// affected list under mu.
type store[L any] struct {
	mu       sync.Mutex
	untagged atomicList[L]
	tagged   sync.Map // tag → *atomicList[L]
}

func (s *store[L]) add(tag string, fn L, fiber *dshctx.Fiber, opts Option) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := Position()
	key := fiber.Order()
	if opts&Prepend != 0 {
		seq = -seq
		key = seq
	} else if key == 0 {
		key = seq
	}
	al := &s.untagged
	if tag != "" {
		v, _ := s.tagged.LoadOrStore(tag, &atomicList[L]{})
		al = v.(*atomicList[L])
	}
	old := al.load()
	e := entry[L]{fn: fn, key: key, seq: seq, fiber: fiber}
	at := len(old)
	for at > 0 && e.before(&old[at-1]) {
		at--
	}
	entries := make([]entry[L], 0, len(old)+1)
	entries = append(append(append(entries, old[:at]...), e), old[at:]...)
	al.store(&list[L]{entries: entries})
	return seq
}

func (s *store[L]) remove(tag string, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	al := &s.untagged
	if tag != "" {
		v, ok := s.tagged.Load(tag)
		if !ok {
			return
		}
		al = v.(*atomicList[L])
	}
	old := al.load()
	var entries []entry[L]
	if n := len(old); n > 0 && old[n-1].seq == seq {
		// Removing the newest entry, the usual case when a fiber unwinds,
		// shares the array: published arrays are never written again, and
		// add always copies into a fresh one.
		entries = old[:n-1]
	} else {
		entries = make([]entry[L], 0, len(old))
		for _, e := range old {
			if e.seq != seq {
				entries = append(entries, e)
			}
		}
	}
	if len(entries) == 0 {
		if tag != "" {
			// Forget the tag entirely so agents that come and go leave nothing.
			s.tagged.Delete(tag)
		}
		al.store(nil)
		return
	}
	al.store(&list[L]{entries: entries})
}

// lists returns the snapshots a dispatch with tag walks: listeners outside
// any scope, and those of the tag's scope.
func (s *store[L]) lists(tag string) (u, t []entry[L]) {
	ul, tl := s.snapshots(tag)
	return ul.all(), tl.all()
}

// snapshots is lists as the immutable list objects themselves, which a
// value can point to without copying the slices.
func (s *store[L]) snapshots(tag string) (u, t *list[L]) {
	u = s.untagged.p.Load()
	if tag != "" {
		if v, ok := s.tagged.Load(tag); ok {
			t = v.(*atomicList[L]).p.Load()
		}
	}
	return u, t
}

func (l *list[L]) all() []entry[L] {
	if l == nil {
		return nil
	}
	return l.entries
}

// register validates a listener and ties it to ctx's fiber.
func register[L any](ctx *dshctx.Context, local *dshctx.Local[store[L]], event string, fn L, isNil bool, opts []Option) (func(), error) {
	if event == "" {
		return nil, errs.New(errs.InvalidArgument, "the event was declared with an empty name; give it a name such as \"agent/request\"")
	}
	if ctx == nil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("On %q: the context is nil", event))
	}
	if isNil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("On %q: the listener is nil", event))
	}
	var o Option
	for _, x := range opts {
		o |= x
	}
	tag := ctx.Tag()
	if o&Global != 0 {
		tag = ""
	}
	s := local.Get(ctx)
	if !ctx.Active() {
		return nil, ctx.Err()
	}
	seq := s.add(tag, fn, ctx.Fiber(), o)
	off, err := ctx.OnDispose(event, func() error { s.remove(tag, seq); return nil })
	if err != nil {
		// The fiber ended between the check and the registration.
		s.remove(tag, seq)
		return nil, err
	}
	return off, nil
}

// merge steps through the two snapshots in seq order. It returns the entry at
// combined position (i, j) and the position after it; ok is false at the end.
func merge[L any](u, t []entry[L], i, j int32) (e *entry[L], ni, nj int32, ok bool) {
	switch {
	case int(i) < len(u) && (int(j) >= len(t) || u[i].before(&t[j])):
		return &u[i], i + 1, j, true
	case int(j) < len(t):
		return &t[j], i, j + 1, true
	}
	return nil, i, j, false
}

func checkDispatch(event string, at *dshctx.Context) error {
	if event == "" {
		return errs.New(errs.InvalidArgument, "dispatch of an event declared with an empty name")
	}
	if at == nil {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("dispatch %q: the context to dispatch at is nil", event))
	}
	return nil
}

func panicError(event string, fiber *dshctx.Fiber, r any) error {
	fiber.Logger().Debug("listener panic", "event", event, "stack", string(debug.Stack()))
	return errs.New(errs.ListenerFailed, fmt.Sprintf("listener of %q in fiber %q panicked: %v", event, fiber.Name(), r)).WithReason("event/panic")
}

func defaultPanic(event string, r any) error {
	return errs.New(errs.ListenerFailed, fmt.Sprintf("the default step of %q panicked: %v", event, r)).WithReason("event/panic")
}

func orBackground(ctx stdctx.Context) stdctx.Context {
	if ctx == nil {
		return stdctx.Background()
	}
	return ctx
}

func dispatchPanic(event string, r any) error {
	return errs.New(errs.ListenerFailed, fmt.Sprintf("the dispatch of %q panicked before any listener ran: %v", event, r)).WithReason("event/panic")
}
