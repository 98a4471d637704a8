// Command inprocess-plugin shows how to write an in-process dsh plugin and
// run it from a config, the way the dsh binary does.
//
// The plugin, "example.no-shouting", is an admission listener: it refuses
// prompts written in capital letters and lets everything else through. It
// registers itself under a namespaced id at init, so config entries can
// use it; mounted in a preset it would govern one agent only.
//
//	go run ./examples/inprocess-plugin
package main

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	_ "github.com/dsh-go/dsh/plugins/all" // the built-in plugins: llm.scripted, ...
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// Config is the plugin's own config; the entry's `config:` is decoded into
// it strictly, so a typo in a key is an error that names the line.
type Config struct {
	// MinLetters is how many letters a prompt needs before it can count as
	// shouting.
	MinLetters int `koanf:"min_letters"`
}

// Validate is called after decoding; its error becomes a config error.
func (c Config) Validate() error {
	if c.MinLetters < 1 {
		return fmt.Errorf("min_letters must be at least 1")
	}
	return nil
}

func init() {
	host.Register(host.Info{
		ID:     "example.no-shouting",
		Doc:    "refuses prompts written in capital letters",
		Plugin: noShouting,
		Config: func() any { return &Config{MinLetters: 3} },
	})
}

// noShouting is the plugin. Everything it registers through ctx belongs to
// its fiber and goes away when the entry is removed or the host stops.
var noShouting = dshctx.Define("example.no-shouting", func(ctx *dshctx.Context, config any) error {
	cfg := config.(*Config)
	_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next waterfall.Next[agentcontroller.Admission, agentcontroller.Decision]) (agentcontroller.Decision, error) {
		if shouting(a.Message.Content, cfg.MinLetters) {
			return agentcontroller.Reject("example/shouting", "Please do not shout.", false), nil
		}
		return next.Call(c, a) // admit: pass the message on
	})
	return err
})

func shouting(s string, minLetters int) bool {
	letters := 0
	for _, r := range s {
		if r >= 'a' && r <= 'z' {
			return false
		}
		if r >= 'A' && r <= 'Z' {
			letters++
		}
	}
	return letters >= minLetters
}

const config = `
plugins:
  - use: llm.scripted          # an offline model that echoes
  - id: manners
    use: example.no-shouting
    config: {min_letters: 4}
agents:
  - id: main
    provider: scripted
log:
  level: error
`

func main() {
	if err := run(os.Stdout, []string{"hello there", "HELLO THERE"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run starts a host from config and sends each prompt through the agent
// controller, printing the answer or the refusal.
func run(out io.Writer, prompts []string) error {
	cfg, err := host.Parse("example.yaml", []byte(config), host.LoadOptions{Environ: []string{}})
	if err != nil {
		return err
	}
	h, err := host.Start(cfg, host.Options{})
	if err != nil {
		return err
	}
	defer h.Close(stdctx.Background())

	agent, _ := h.Agent("main")
	var answer strings.Builder
	session.EventAppended.On(agent.Context(), func(_ stdctx.Context, a session.Appended) error {
		if a.Event.Type == session.AssistantMessage {
			answer.WriteString(a.Event.Message.Content)
		}
		return nil
	})
	for _, p := range prompts {
		answer.Reset()
		_, err := h.Controller().Deliver(stdctx.Background(), agent, agentcontroller.Request{Mode: agentcontroller.Followup, Content: p})
		if ref, refused := agentcontroller.RefusalOf(err); refused {
			fmt.Fprintf(out, "%q refused (%s): %s\n", p, ref.Reason, ref.Message)
			continue
		} else if err != nil {
			return err
		}
		agent.WhenIdle(stdctx.Background())
		fmt.Fprintf(out, "%q answered: %s\n", p, answer.String())
	}
	return nil
}
