package waterfall_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/internal/syncbuf"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rootWithLog(t *testing.T) (*dshctx.Context, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	root := dshctx.New(dshctx.WithLogger(hclog.New(&hclog.LoggerOptions{Output: buf})))
	ctxtest.Cleanup(t, root)
	return root, buf
}

// tracer returns a listener that appends name to the payload's trace.
func tracer(name string) waterfall.Listener[[]string, []string] {
	return func(ctx stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		return next.Call(ctx, append(slices.Clone(p), name))
	}
}

func identity(_ stdctx.Context, p []string) ([]string, error) { return p, nil }

func TestWaterfallOrderPrependAndDefault(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/order", identity)
	for _, n := range []string{"a", "b"} {
		if _, err := w.On(root, tracer(n)); err != nil {
			t.Fatal(err)
		}
	}
	w.On(root, tracer("first"), waterfall.Prepend)
	w.On(root, tracer("c"))
	got, err := w.Dispatch(stdctx.Background(), root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"first", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// No listeners: the default alone answers; a nil default gives zero.
	//lint:ignore SA1012 a nil ctx is accepted as Background, and this checks it
	if r, err := waterfall.New[int, int]("test/empty", nil).Dispatch(nil, root, 5); r != 0 || err != nil {
		t.Fatalf("nil default: %v %v", r, err)
	}
}

func TestWaterfallCutHoldAndReplace(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/cut", identity)
	gate := make(chan struct{})
	w.On(root, func(ctx stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		<-gate // hold
		return next.Call(ctx, append(p, "held"))
	})
	w.On(root, func(ctx stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		return []string{"refused"}, nil // cut: never calls next
	})
	w.On(root, tracer("unreached"))
	done := make(chan []string)
	go func() { r, _ := w.Dispatch(stdctx.Background(), root, nil); done <- r }()
	close(gate)
	if got := <-done; !slices.Equal(got, []string{"refused"}) {
		t.Fatalf("got %v", got)
	}
}

func TestNextTwiceAndAfterReturnAreErrors(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/twice", identity)
	var kept waterfall.Next[[]string, []string]
	var second error
	w.On(root, func(ctx stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		r, err := next.Call(ctx, p)
		_, second = next.Call(ctx, p)
		kept = next
		return r, err
	})
	w.On(root, tracer("x"))
	got, err := w.Dispatch(stdctx.Background(), root, nil)
	if err != nil || !slices.Equal(got, []string{"x"}) {
		t.Fatalf("first call: %v %v", got, err)
	}
	if !errs.HasCode(second, errs.NextMisuse) || !strings.Contains(second.Error(), "twice") {
		t.Fatalf("second next: %v", second)
	}
	_, late := kept.Call(stdctx.Background(), nil)
	if !errs.HasCode(late, errs.NextMisuse) || !strings.Contains(late.Error(), "after the dispatch") {
		t.Fatalf("late next: %v", late)
	}
	var zero waterfall.Next[int, int]
	if _, err := zero.Call(stdctx.Background(), 1); !errs.HasCode(err, errs.NextMisuse) {
		t.Fatalf("zero next: %v", err)
	}
}

func TestListenerPanicBecomesErrorNamingEventAndFiber(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/panic", identity)
	w.On(root, tracer("outer"))
	f, _ := root.Plugin(dshctx.Define("explosive", func(ctx *dshctx.Context, _ any) error {
		_, err := w.On(ctx, func(stdctx.Context, []string, waterfall.Next[[]string, []string]) ([]string, error) {
			panic("boom")
		})
		return err
	}), nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := w.Dispatch(stdctx.Background(), root, nil)
	if !errs.HasCode(err, errs.ListenerFailed) {
		t.Fatalf("want LISTENER_FAILED, got %v", err)
	}
	for _, want := range []string{"test/panic", "explosive", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error lacks %q: %v", want, err)
		}
	}
	// A panic leaves nothing behind: the next dispatch works.
	f.Dispose(stdctx.Background())
	if got, err := w.Dispatch(stdctx.Background(), root, nil); err != nil || !slices.Equal(got, []string{"outer"}) {
		t.Fatalf("after panic: %v %v", got, err)
	}
}

func TestCancellationCheckedBetweenListeners(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/cancel", identity)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	w.On(root, func(c stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		cancel()
		return next.Call(c, p)
	})
	reached := false
	w.On(root, func(c stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		reached = true
		return next.Call(c, p)
	})
	_, err := w.Dispatch(ctx, root, nil)
	if !errors.Is(err, stdctx.Canceled) || reached {
		t.Fatalf("err %v, reached %v", err, reached)
	}
}

func TestEmitRunsEveryListenerAndLogsFailures(t *testing.T) {
	root, logs := rootWithLog(t)
	e := waterfall.NewEmit[string]("test/emit")
	var got []string
	e.On(root, func(_ stdctx.Context, p string) error { got = append(got, "1:"+p); return nil })
	f, _ := root.Plugin(dshctx.Define("faulty", func(ctx *dshctx.Context, _ any) error {
		e.On(ctx, func(stdctx.Context, string) error { return errors.New("listener broke") })
		e.On(ctx, func(stdctx.Context, string) error { panic("listener exploded") })
		return nil
	}), nil)
	e.On(root, func(_ stdctx.Context, p string) error { got = append(got, "4:"+p); return nil })
	if err := e.Emit(stdctx.Background(), root, "x"); err != nil {
		t.Fatalf("emit must not propagate listener failures: %v", err)
	}
	if !slices.Equal(got, []string{"1:x", "4:x"}) {
		t.Fatalf("got %v", got)
	}
	out := logs.String()
	for _, want := range []string{"listener broke", "listener exploded", "test/emit", "faulty"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
	f.Dispose(stdctx.Background())
}

func TestSerialFirstNonZeroWins(t *testing.T) {
	root := quietRoot(t)
	s := waterfall.NewSerial[string, string]("test/serial")
	var asked []string
	ask := func(name, answer string) waterfall.SerialListener[string, string] {
		return func(stdctx.Context, string) (string, error) { asked = append(asked, name); return answer, nil }
	}
	s.On(root, ask("a", ""))
	s.On(root, ask("b", "B"))
	s.On(root, ask("c", "C"))
	got, err := s.Dispatch(stdctx.Background(), root, "q")
	if err != nil || got != "B" || !slices.Equal(asked, []string{"a", "b"}) {
		t.Fatalf("got %q %v, asked %v", got, err, asked)
	}
	boom := errors.New("boom")
	s2 := waterfall.NewSerial[string, int]("test/serial-err")
	s2.On(root, func(stdctx.Context, string) (int, error) { return 0, boom })
	if _, err := s2.Dispatch(stdctx.Background(), root, ""); !errors.Is(err, boom) {
		t.Fatalf("serial error: %v", err)
	}
	s3 := waterfall.NewSerial[string, int]("test/serial-panic")
	s3.On(root, func(stdctx.Context, string) (int, error) { panic("p") })
	if _, err := s3.Dispatch(stdctx.Background(), root, ""); !errs.HasCode(err, errs.ListenerFailed) {
		t.Fatalf("serial panic: %v", err)
	}
}

func TestSnapshotPerDispatch(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/snapshot", identity)
	var offB func()
	w.On(root, func(ctx stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		// Changes made during a dispatch affect the next one only.
		offB()
		w.On(root, tracer("late"))
		return next.Call(ctx, append(p, "a"))
	})
	offB, _ = w.On(root, tracer("b"))
	got, _ := w.Dispatch(stdctx.Background(), root, nil)
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first dispatch %v", got)
	}
	got, _ = w.Dispatch(stdctx.Background(), root, nil)
	if !slices.Equal(got, []string{"a", "late"}) {
		t.Fatalf("second dispatch %v", got)
	}
	got, _ = w.Dispatch(stdctx.Background(), root, nil)
	if !slices.Equal(got, []string{"a", "late", "late"}) {
		t.Fatalf("third dispatch %v", got)
	}
}

func TestListenerGoesAwayWithFiberAndOff(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/lifetime", identity)
	f, _ := root.Plugin(dshctx.Define("p", func(ctx *dshctx.Context, _ any) error {
		_, err := w.On(ctx, tracer("plugin"))
		return err
	}), nil)
	off, _ := w.On(root, tracer("root"))
	got, _ := w.Dispatch(stdctx.Background(), root, nil)
	if !slices.Equal(got, []string{"plugin", "root"}) {
		t.Fatalf("got %v", got)
	}
	f.Dispose(stdctx.Background())
	off()
	got, _ = w.Dispatch(stdctx.Background(), root, nil)
	if len(got) != 0 {
		t.Fatalf("listeners survived: %v", got)
	}
}

func TestScopeFiltering(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/scope", identity)
	a, _ := root.Scoped("A")
	b, _ := root.Scoped("B")
	w.On(root, tracer("untagged"))
	w.On(a, tracer("A"))
	w.On(b, tracer("B"))
	w.On(b, tracer("B-global"), waterfall.Global)
	// A plugin applied in a scope inherits the scope's tag.
	root.Plugin(dshctx.Define("preset", func(ctx *dshctx.Context, _ any) error {
		_, err := w.On(ctx, tracer("preset-in-A"))
		return err
	}), nil)
	a.Plugin(dshctx.Define("preset", func(ctx *dshctx.Context, _ any) error {
		_, err := w.On(ctx, tracer("A-preset"))
		return err
	}), nil)
	cases := map[*dshctx.Context][]string{
		root: {"untagged", "B-global", "preset-in-A"},
		a:    {"untagged", "A", "B-global", "preset-in-A", "A-preset"},
		b:    {"untagged", "B", "B-global", "preset-in-A"},
	}
	for at, want := range cases {
		got, err := w.Dispatch(stdctx.Background(), at, nil)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("dispatch at %q: got %v, want %v", at.Tag(), got, want)
		}
	}
	// Disposing scope A removes everything registered through it.
	a.Dispose(stdctx.Background())
	got, _ := w.Dispatch(stdctx.Background(), a, nil)
	if want := []string{"untagged", "B-global", "preset-in-A"}; !slices.Equal(got, want) {
		t.Fatalf("after dispose: %v", got)
	}
}

func TestBadRegistrationAndDispatch(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/bad", identity)
	if _, err := w.On(root, nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nil listener: %v", err)
	}
	if _, err := w.On(nil, tracer("x")); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nil ctx: %v", err)
	}
	unnamed := waterfall.New("", identity)
	if _, err := unnamed.On(root, tracer("x")); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("unnamed event: %v", err)
	}
	if _, err := unnamed.Dispatch(stdctx.Background(), root, nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("unnamed dispatch: %v", err)
	}
	if _, err := w.Dispatch(stdctx.Background(), nil, nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("nil at: %v", err)
	}
	if err := waterfall.NewEmit[int]("e").Emit(stdctx.Background(), nil, 1); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("emit nil at: %v", err)
	}
	if _, err := waterfall.NewEmit[int]("e").On(root, nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("emit nil listener: %v", err)
	}
	f, _ := root.Plugin(dshctx.Define("gone", func(*dshctx.Context, any) error { return nil }), nil)
	var kept *dshctx.Context
	f2, _ := root.Plugin(dshctx.Define("kept", func(c *dshctx.Context, _ any) error { kept = c; return nil }), nil)
	f.Dispose(stdctx.Background())
	f2.Dispose(stdctx.Background())
	if _, err := w.On(kept, tracer("x")); !errs.HasCode(err, errs.ContextInactive) {
		t.Fatalf("disposed ctx: %v", err)
	}
}

func TestConcurrentDispatchAndRegistration(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New[int, int]("test/concurrent", func(_ stdctx.Context, p int) (int, error) { return p, nil })
	w.On(root, passOn)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 500 {
				if r, err := w.Dispatch(stdctx.Background(), root, 0); err != nil || r < 1 {
					t.Errorf("dispatch %d %v", r, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			s, _ := root.Scoped(fmt.Sprintf("s%d", g))
			for range 200 {
				off, err := w.On(s, passOn)
				if err != nil {
					t.Error(err)
					return
				}
				w.Dispatch(stdctx.Background(), s, 0)
				off()
			}
			s.Dispose(stdctx.Background())
		}()
	}
	wg.Wait()
}

func TestDefaultStepPanicIsAnError(t *testing.T) {
	root := quietRoot(t)
	w := waterfall.New("test/default-panic", func(stdctx.Context, int) (int, error) { panic("default broke") })
	for _, withListener := range []bool{false, true} {
		if withListener {
			w.On(root, passOn)
		}
		_, err := w.Dispatch(stdctx.Background(), root, 1)
		if !errs.HasCode(err, errs.ListenerFailed) || !strings.Contains(err.Error(), "default step") {
			t.Fatalf("listener=%v: %v", withListener, err)
		}
	}
}
