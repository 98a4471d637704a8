package agentcontroller_test

import (
	stdctx "context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/services/agentcontroller"
)

// TestInsertedListenerMayDeliverToTheSameAgent is issue 11 item 11: a
// listener of agent/inbox/inserted that delivers to the same agent used to
// wait for the chain its own delivery still held, until the controller was
// disposed.
func TestInsertedListenerMayDeliverToTheSameAgent(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	var mu sync.Mutex
	var heard []string
	var replyErr error
	agentcontroller.EventInserted.On(e.root, func(ctx stdctx.Context, in agentcontroller.Inserted) error {
		mu.Lock()
		heard = append(heard, in.Message.Content)
		mu.Unlock()
		if in.Message.Content == "question" {
			_, err := e.ctl.Deliver(ctx, in.Agent, send("auto-reply"))
			mu.Lock()
			replyErr = err
			mu.Unlock()
		}
		return nil
	})
	if r := wait(t, e.deliverAsync(stdctx.Background(), a, send("question"))); r.err != nil {
		t.Fatal(r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if replyErr != nil {
		t.Fatalf("the listener's delivery failed: %v", replyErr)
	}
	if want := []string{"question", "auto-reply"}; !slices.Equal(a.Messages(), want) || !slices.Equal(heard, want) {
		t.Fatalf("inbox %v, inserted events %v", a.Messages(), heard)
	}
}

// TestInsertedEventsKeepTheInsertionOrder: emitted outside the chain, the
// events of one agent still come one at a time and in the inbox's order.
func TestInsertedEventsKeepTheInsertionOrder(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	var mu sync.Mutex
	var heard []string
	inside := 0
	agentcontroller.EventInserted.On(e.root, func(_ stdctx.Context, in agentcontroller.Inserted) error {
		mu.Lock()
		inside++
		if inside > 1 {
			t.Error("two inserted events of one agent ran at once")
		}
		heard = append(heard, in.Message.Content)
		mu.Unlock()
		mu.Lock()
		inside--
		mu.Unlock()
		return nil
	})
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := e.ctl.Deliver(stdctx.Background(), a, send(fmt.Sprintf("%d-%d", s, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 200 || !slices.Equal(heard, a.Messages()) {
		t.Fatalf("inserted events differ from the inbox order:\n%s\n%s", strings.Join(heard, " "), strings.Join(a.Messages(), " "))
	}
}
