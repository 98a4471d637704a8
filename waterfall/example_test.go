package waterfall_test

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// Message is the payload of the example admission event.
type Message struct{ From, Text string }

// Admit is a waterfall whose innermost step admits.
var Admit = waterfall.New("example/admit", func(stdctx.Context, Message) (string, error) {
	return "admitted", nil
})

func Example_hold() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())

	ready := make(chan struct{})
	// A holding listener waits before next; it gives up when ctx ends.
	Admit.On(root, func(ctx stdctx.Context, m Message, next waterfall.Next[Message, string]) (string, error) {
		select {
		case <-ready:
			return next.Call(ctx, m)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	close(ready)
	decision, err := Admit.Dispatch(stdctx.Background(), root, Message{From: "ana", Text: "hi"})
	fmt.Println(decision, err)
	// Output: admitted <nil>
}

func Example_refuse() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())

	// A refusing listener returns its own decision without calling next.
	Admit.On(root, func(ctx stdctx.Context, m Message, next waterfall.Next[Message, string]) (string, error) {
		if m.From == "spammer" {
			return "refused", nil
		}
		return next.Call(ctx, m)
	})
	for _, from := range []string{"ana", "spammer"} {
		decision, _ := Admit.Dispatch(stdctx.Background(), root, Message{From: from})
		fmt.Println(from, decision)
	}
	// Output:
	// ana admitted
	// spammer refused
}

func Example_scoped() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	status := waterfall.NewEmit[string]("example/status")

	// A listener registered in agent A's scope hears only A's events.
	agentA, _ := root.Scoped("A")
	agentB, _ := root.Scoped("B")
	status.On(agentA, func(_ stdctx.Context, s string) error {
		fmt.Println("A's listener heard:", s)
		return nil
	})
	status.Emit(stdctx.Background(), agentB, "B is busy")
	status.Emit(stdctx.Background(), agentA, "A is idle")
	// Output: A's listener heard: A is idle
}
