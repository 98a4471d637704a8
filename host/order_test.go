package host_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// orderConfig configures test.order, whose admission listener appends its
// name to the trace of the message.
type orderConfig struct {
	Name    string `koanf:"name"`
	Version int    `koanf:"version"`
}

var (
	traceMu sync.Mutex
	traces  = map[string][]string{}
)

func init() {
	plugin.Register("test.order", "traces the order of admission listeners (tests only)",
		func(ctx *dshctx.Context, cfg orderConfig) error {
			_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
				traceMu.Lock()
				traces[a.Message.Content] = append(traces[a.Message.Content], cfg.Name)
				traceMu.Unlock()
				return next.Call(c, a)
			})
			return err
		})
}

func trace(content string) string {
	traceMu.Lock()
	defer traceMu.Unlock()
	return strings.Join(traces[content], " ")
}

const orderBase = `
plugins:
  - use: llm.scripted
  - id: A
    use: test.order
    config: {name: A}
  - id: B
    use: test.order
    config: {name: B, version: %d}
  - id: C
    use: test.order
    config: {name: C}
agents:
  - id: main
    provider: scripted
    preset: late
presets:
  late:
    - id: P
      use: test.order
      config: {name: P}
`

// TestReloadKeepsListenerOrder: a restarted entry's listeners take its
// place among the root entries, before the agents' presets.
func TestReloadKeepsListenerOrder(t *testing.T) {
	traceMu.Lock()
	clear(traces)
	traceMu.Unlock()
	h := start(t, fmt.Sprintf(orderBase, 1))
	deliver(t, h, "main", "before")
	if got := trace("before"); got != "A B C P" {
		t.Fatalf("order at start: %q", got)
	}
	if err := h.Reload(stdctx.Background(), mustParse(t, fmt.Sprintf(orderBase, 2))); err != nil {
		t.Fatal(err)
	}
	deliver(t, h, "main", "after")
	if got := trace("after"); got != "A B C P" {
		t.Fatalf("order after B restarted: %q", got)
	}
	// A new entry between two kept ones takes its place too.
	added := strings.Replace(fmt.Sprintf(orderBase, 2), "  - id: C\n", "  - id: BB\n    use: test.order\n    config: {name: BB}\n  - id: C\n", 1)
	if err := h.Reload(stdctx.Background(), mustParse(t, added)); err != nil {
		t.Fatal(err)
	}
	deliver(t, h, "main", "added")
	if got := trace("added"); got != "A B BB C P" {
		t.Fatalf("order after BB was added: %q", got)
	}
}
