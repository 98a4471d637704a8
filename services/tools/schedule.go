package tools

import (
	stdctx "context"
	"errors"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// DefaultMaxParallel caps the parallel-safe calls of one step that run at
// once when the caller names no cap.
const DefaultMaxParallel = 8

// ErrNotStarted is the Outcome.Err of a call that never started because
// Schedule.Start refused it (or a call before it).
var ErrNotStarted = errors.New("tools: the call was not started")

// Schedule says how Service.Run runs the calls of one step and how it
// reports them. Both hooks run on the goroutine that called Run, so a
// caller whose log needs a single writer (the agent loop's session) can
// write from them.
type Schedule struct {
	// MaxParallel caps the parallel-safe calls running at once; <= 0 means
	// DefaultMaxParallel.
	MaxParallel int
	// Start, when set, is called right before call i starts. Returning
	// false stops the step: call i and every call after it never start.
	// Calls start in call order.
	Start func(i int) bool
	// Done is called once per call, in call order, whatever order the
	// calls finish in: a call is reported once it and every call before it
	// have finished or been given up.
	Done func(i int, o Outcome)
}

// Outcome is how one scheduled call ended.
type Outcome struct {
	// Ran is false for a call that never started.
	Ran bool
	// Result is what the call returned; meaningless when Err is set.
	Result Result
	// Err is the Go error the call ended with (see Service.Execute: a
	// panic, a cancelled context, a failing tools/execute listener). For a
	// call that never started it says why: the failure of another call,
	// the cause of the cancelled context, or ErrNotStarted.
	Err error
}

// slot is Run's state of one call.
type slot struct {
	safe     bool
	finished bool
	out      Outcome
}

func (s *slot) finish(o Outcome) { s.out, s.finished = o, true }

// done is what a worker hands back to Run.
type done struct {
	i   int
	r   Result
	err error
}

// Run executes calls, the tool calls of one step, in groups: consecutive
// parallel-safe calls start together, up to MaxParallel at once (a finished
// call makes room for the next); a call that is not parallel-safe —
// including a call of a tool unknown here, which is conservative and costs
// nothing since it only produces an error result — waits for every call
// before it and runs alone, and the calls after it wait for it.
//
// Parallel calls run on goroutines of their own, except the last call of
// each group, which runs on the caller's goroutine as an exclusive call
// does: nothing could start before the group ends anyway, and a goroutine
// less is a hand-off less.
//
// Once ctx is cancelled, or a call ends with a Go error, nothing more
// starts, the calls still running get a cancelled context, and Run waits
// for them: a tool that ignores its context delays the end of the step,
// but its result is kept and no later call runs. Every call is reported
// through Done, exactly once, in call order. Run returns the first Go error
// a call ended with (the failure that stopped the step; the errors of the
// calls it cancelled are its consequence), or nil.
func (s *Service) Run(ctx stdctx.Context, at *dshctx.Context, calls []Call, sch Schedule) error {
	n := len(calls)
	if n == 0 {
		return nil
	}
	limit := sch.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	runCtx, cancel := stdctx.WithCancelCause(ctx)
	defer cancel(nil)

	// One allocation holds the state of every call.
	slots := make([]slot, n)
	for i := range calls {
		slots[i].safe = s.parallelSafe(at, calls[i].Name)
	}
	var (
		ch        chan done // made on the first parallel call
		next      int       // the next call to start
		reported  int       // the next call to report
		running   int       // parallel calls running
		failure   error     // the first Go error a call ended with
		stopCause error     // why the calls from next on never start
	)
	fail := func(err error) {
		if failure == nil {
			failure = err
			cancel(err)
		}
	}
	for {
		for reported < n && slots[reported].finished {
			if sch.Done != nil {
				sch.Done(reported, slots[reported].out)
			}
			reported++
		}
		if reported == n {
			if failure != nil && ctx.Err() == nil {
				// The first failure in time cancelled runCtx; the errors
				// seen before it here may be its consequences.
				return stdctx.Cause(runCtx)
			}
			return failure
		}
		// Start what may start now.
		for stopCause == nil && next < n {
			if runCtx.Err() != nil {
				stopCause = stdctx.Cause(runCtx)
				break
			}
			if running >= limit || (!slots[next].safe && running > 0) {
				break
			}
			if sch.Start != nil && !sch.Start(next) {
				stopCause = ErrNotStarted
				break
			}
			i := next
			next++
			if !slots[i].safe || i+1 == n || !slots[i+1].safe {
				// Alone by construction, or the last call of its group,
				// after which nothing could start before the group ends:
				// run it here, no goroutine needed.
				r, err := s.runOne(runCtx, at, calls[i])
				slots[i].finish(Outcome{Ran: true, Result: r, Err: err})
				if err != nil {
					fail(err)
				}
				break // report it before starting what follows
			}
			if ch == nil {
				ch = make(chan done, n)
			}
			running++
			go func() {
				r, err := s.runOne(runCtx, at, calls[i])
				if err != nil {
					// Stop the siblings now: Run may be busy running one.
					cancel(err)
				}
				ch <- done{i: i, r: r, err: err}
			}()
		}
		if stopCause != nil {
			for ; next < n; next++ {
				slots[next].finish(Outcome{Err: stopCause})
			}
		}
		if running == 0 {
			continue // whatever is finished gets reported; more may start
		}
		// Take every call that finished meanwhile, blocking for the first.
		for d, more := <-ch, true; more; {
			running--
			slots[d.i].finish(Outcome{Ran: true, Result: d.r, Err: d.err})
			if d.err != nil {
				fail(d.err)
			}
			select {
			case d = <-ch:
			default:
				more = false
			}
		}
	}
}

// parallelSafe reads the tool's declaration; an unknown tool runs alone.
func (s *Service) parallelSafe(at *dshctx.Context, name string) bool {
	t := s.Lookup(at, name)
	return t != nil && t.ParallelSafe
}

// runOne executes one call. Execute already turns a tool's panic into
// ToolPanicked; this guard covers what panics around it, since on a worker
// goroutine an unrecovered panic would take the process down.
func (s *Service) runOne(ctx stdctx.Context, at *dshctx.Context, c Call) (r Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = Result{}, errs.New(ToolPanicked, fmt.Sprintf("running tool %q panicked: %v", c.Name, p))
		}
	}()
	return s.Execute(ctx, at, c)
}
