package live_test

import (
	stdctx "context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// readUntil applies updates until the replica holds seq.
func readUntil(t testing.TB, c *live.Client, r *replica, seq int64) {
	t.Helper()
	for r.last() < seq {
		if err := r.apply(next(t, c)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDurableBacklogThenLive(t *testing.T) {
	for _, window := range []int{2, 1024} { // older events from the loader, or all from the window
		a := newAgent(t)
		a.turn(1, 3, nil) // before the Hub exists
		h := newHub(t, a, live.Options{Window: window})
		a.turn(2, 3, nil)
		for _, after := range []int64{0, 4, h.LastSeq()} {
			c, err := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: after})
			if err != nil {
				t.Fatal(err)
			}
			r := &replica{events: a.sess.Events(1)[:after]}
			readUntil(t, c, r, h.LastSeq())
			a.turn(int(after)+10, 2, nil)
			readUntil(t, c, r, h.LastSeq())
			sameLog(t, r.events, a.sess)
			c.Detach()
			if _, err := c.Next(stdctx.Background()); !errs.HasCode(err, live.Detached) {
				t.Fatalf("after Detach: %v", err)
			}
		}
	}
}

func TestAttachBeyondTheLogIsRefused(t *testing.T) {
	a := newAgent(t)
	a.turn(1, 1, nil)
	h := newHub(t, a, live.Options{})
	if _, err := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: 99}); !errs.HasCode(err, live.BadSeq) {
		t.Fatalf("AfterSeq beyond the log: %v", err)
	}
}

func TestMidStreamAttachGetsSnapshotThenChunks(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{})
	var c *live.Client
	var r replica
	a.turn(1, 10, func() {
		var err error
		if c, err = h.Attach(stdctx.Background(), live.AttachOptions{}); err != nil {
			t.Fatal(err)
		}
		r.events = nil
	})
	readUntil(t, c, &r, h.LastSeq())
	sameLog(t, r.events, a.sess)
	if r.checked != 1 {
		t.Fatalf("the streamed message was not checked against the log (%d)", r.checked)
	}
}

func TestSnapshotIsTheAssemblyOfTheChunksSoFar(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{})
	a.append(session.Event{Type: session.TurnStart, Turn: 1})
	chunks := []llm.Chunk{
		{Kind: llm.ChunkReasoning, Text: "think ", Signature: "sig"},
		{Kind: llm.ChunkText, Text: "hello "},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 0, ID: "c1", Name: "read"}},
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: `{"path":`}},
		{Kind: llm.ChunkText, Text: "world"},
	}
	var asm llm.Assembler
	for _, ch := range chunks {
		asm.Add(ch)
		a.emit(1, 1, "m1", ch)
	}
	c, _ := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: 1})
	u := next(t, c)
	want := asm.Message()
	want.ID = "m1"
	if u.Kind != live.KindSnapshot || u.Snapshot.Next != len(chunks) || u.Snapshot.MessageID != "m1" || u.Snapshot.Turn != 1 || u.Snapshot.Step != 1 {
		t.Fatalf("snapshot: %+v", u)
	}
	if got := u.Snapshot.Message; got.Content != want.Content || got.Reasoning != want.Reasoning || got.ReasoningSignature != "sig" ||
		len(got.ToolCalls) != 1 || got.ToolCalls[0] != want.ToolCalls[0] || got.ID != "m1" {
		t.Fatalf("snapshot message %+v, want %+v", got, want)
	}
	a.emit(1, 1, "m1", llm.Chunk{Kind: llm.ChunkText, Text: "!"})
	if u := next(t, c); u.Kind != live.KindChunk || u.Chunk.Index != len(chunks) || u.Chunk.Chunk.Text != "!" {
		t.Fatalf("chunk after the snapshot: %+v", u)
	}
	// Once the message is durable there is nothing in flight.
	m := want
	a.append(session.Event{Type: session.AssistantMessage, Turn: 1, Step: 1, Message: &m})
	c2, _ := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: h.LastSeq()})
	h.Notice(live.Notice{Type: "probe"})
	if u := next(t, c2); u.Kind != live.KindNotice {
		t.Fatalf("a snapshot after the message became durable: %+v", u)
	}
	// An aborted stream ends with its step.
	a.emit(1, 2, "m2", llm.Chunk{Kind: llm.ChunkText, Text: "cut"})
	a.append(session.Event{Type: session.StepEnd, Turn: 1, Step: 2})
	c3, _ := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: h.LastSeq(), AfterNotice: 1})
	h.Notice(live.Notice{Type: "probe"})
	if u := next(t, c3); u.Kind != live.KindNotice {
		t.Fatalf("a snapshot of an aborted stream: %+v", u)
	}
}

func TestReattachAfterDropMidAnswer(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{})
	c, _ := h.Attach(stdctx.Background(), live.AttachOptions{})
	var r replica
	a.turn(1, 20, func() {
		// Half the answer streamed: the client reads part of it, drops,
		// and comes back with its last seq while the stream goes on.
		readUntil(t, c, &r, 3)
		for range 4 {
			if err := r.apply(next(t, c)); err != nil {
				t.Fatal(err)
			}
		}
		c.Detach()
		a.emit(1, 1, "m1", llm.Chunk{Kind: llm.ChunkText, Text: ""}) // one more chunk while away
		var err error
		if c, err = h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: c.LastSeq()}); err != nil {
			t.Fatal(err)
		}
		u := next(t, c)
		if u.Kind != live.KindSnapshot || u.Snapshot.Next != 11 {
			t.Fatalf("re-attach: want the snapshot of 11 chunks first, got %+v", u)
		}
		if err := r.apply(u); err != nil {
			t.Fatal(err)
		}
	})
	readUntil(t, c, &r, h.LastSeq())
	sameLog(t, r.events, a.sess)
	if r.checked != 1 {
		t.Fatal("the message assembled across the drop was not checked")
	}
}

func TestSlowClientIsDroppedNotWaitedFor(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{Buffer: 8})
	slow, _ := h.Attach(stdctx.Background(), live.AttachOptions{Name: "slow"})
	fast, _ := h.Attach(stdctx.Background(), live.AttachOptions{Name: "fast", Buffer: 1000})
	a.turn(1, 30, nil) // returns: nobody waited for slow
	var r replica
	var err error
	for err == nil {
		var u live.Update
		if u, err = slow.Next(stdctx.Background()); err == nil {
			if aerr := r.apply(u); aerr != nil {
				t.Fatal(aerr)
			}
		}
	}
	if !errs.HasCode(err, live.Overflow) || slow.LastSeq() != r.last() {
		t.Fatalf("slow client: %v, last seq %d, replica %d", err, slow.LastSeq(), r.last())
	}
	again, err := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: slow.LastSeq()})
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, again, &r, h.LastSeq())
	sameLog(t, r.events, a.sess)
	var rf replica
	readUntil(t, fast, &rf, h.LastSeq())
	sameLog(t, rf.events, a.sess)
}

// TestNoGapNoDuplicateUnderRace attaches, reads a little, drops and
// re-attaches over and over while a fast stream runs, with a tiny window
// (older events come from the loader) and tiny buffers (clients overflow):
// every client's reconstruction must equal the final log.
func TestNoGapNoDuplicateUnderRace(t *testing.T) {
	a := newAgent(t)
	a.pace = runtime.Gosched
	h := newHub(t, a, live.Options{Window: 4, Buffer: 16})
	done := make(chan struct{})
	// streaming ends with the driver, so that a client waiting for more
	// moves on to its final catch-up.
	streaming, stopped := stdctx.WithCancel(stdctx.Background())
	defer stopped()
	go func() {
		defer stopped()
		defer close(done)
		for turn := 1; turn <= 40; turn++ {
			a.turn(turn, 25, nil)
		}
	}()
	var wg sync.WaitGroup
	var snapshots, overflows, attaches atomic.Int64
	defer func() {
		t.Logf("%d attaches, %d snapshots, %d overflows", attaches.Load(), snapshots.Load(), overflows.Load())
	}()
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var r replica
			finished := false
			for {
				// A client re-attaching forgets the message it was
				// assembling: the backlog holds it if it became durable,
				// the snapshot if it is still in flight.
				r.flight = nil
				c, err := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: r.last(), Buffer: 4 + rng.IntN(40)})
				if err != nil {
					t.Error(err)
					return
				}
				attaches.Add(1)
				for n := rng.IntN(60); n >= 0 || finished; n-- {
					if finished && r.last() == h.LastSeq() && len(r.flight) == 0 {
						c.Detach()
						if err := diffLog(r.events, a.sess); err != nil {
							t.Errorf("client %d: %v", w, err)
						}
						return
					}
					base := streaming
					if finished {
						base = stdctx.Background()
					}
					ctx, cancel := stdctx.WithTimeout(base, 20*time.Second)
					u, err := c.Next(ctx)
					stuck := errors.Is(err, stdctx.DeadlineExceeded)
					cancel()
					if errors.Is(err, stdctx.Canceled) {
						break
					}
					if stuck {
						t.Errorf("client stuck: replica at %d (flight %v), hub at %d", r.last(), r.flight, h.LastSeq())
						return
					}
					if errs.HasCode(err, live.Overflow) {
						overflows.Add(1)
						break
					}
					if err != nil {
						t.Error(err)
						return
					}
					if u.Kind == live.KindSnapshot {
						snapshots.Add(1)
					}
					if err := r.apply(u); err != nil {
						t.Error(err)
						return
					}
				}
				c.Detach()
				select {
				case <-done:
					finished = true
				default:
				}
				if streaming.Err() != nil {
					<-done
					finished = true
				}
			}
		}()
	}
	wg.Wait()
	<-done
}
