// Command inprocess-plugin shows how to write in-process dsh plugins and run
// them from a config, the way the dsh binary does.
//
// It has two plugins, each registered once under a namespaced id:
// example.no-shouting (noshouting.go), an admission listener mounted on the
// root so it governs every agent, and example.word-count (wordcount.go), a
// tool mounted in a preset so only the agent that lists the preset has it.
//
//	go run ./examples/inprocess-plugin
package main

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all" // the built-in plugins: llm.scripted, ...
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

const configYAML = `
plugins:
  - use: llm.scripted          # an offline model: calls the tool, then answers
    config:
      replies:
        - tool_calls: [{name: word_count, arguments: '{"text": "the quick brown fox"}'}]
        - text: Counted.
  - id: manners
    use: example.no-shouting
    config: {min_letters: 4}
presets:
  counting:
    - use: example.word-count  # this agent's own tool
agents:
  - id: main
    provider: scripted
    preset: counting
log:
  level: error
`

func main() {
	if err := run(os.Stdout, configYAML, "main", []string{"hello there", "HELLO THERE"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run starts a host from the YAML text, ensures a session of the agent
// through the session service — the one way an embedding program, like
// every entry point, reaches agents — and sends each prompt, printing the
// tool results and the answer, or the refusal.
func run(out io.Writer, yaml, agentID string, prompts []string) error {
	cfg, err := config.Parse("example.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		return err
	}
	h, err := host.Start(cfg, host.Options{NoConfigAgents: true})
	if err != nil {
		return err
	}
	defer h.Close(stdctx.Background())

	ctx := stdctx.Background()
	var svc sessions.Service = h.Sessions()
	in, err := svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: agentID, AgentID: agentID}})
	if err != nil {
		return err
	}
	defer svc.Close(ctx, in.ID)
	for i, p := range prompts {
		turn, err := svc.Prompt(ctx, in.ID, sessions.PromptRequest{RequestID: fmt.Sprintf("example-%d", i), Content: p})
		if r, refused := sessions.RejectionOf(err); refused {
			fmt.Fprintf(out, "%q refused (%s): %s\n", p, r.Reason, r.Message)
			continue
		} else if err != nil {
			return err
		}
		// The turn's recorded outcome, then what it recorded: the tool
		// results and the answer.
		res, err := turn.Wait(ctx)
		if err != nil {
			return err
		}
		evs, err := svc.History(ctx, in.ID, res.Seq)
		if err != nil {
			return err
		}
		var answer strings.Builder
		for _, e := range evs {
			switch {
			case e.Turn != res.Turn:
			case e.Type == session.ToolResult:
				fmt.Fprintf(&answer, "[%s] ", e.Message.Content)
			case e.Type == session.AssistantMessage:
				answer.WriteString(e.Message.Content)
			}
		}
		fmt.Fprintf(out, "%q answered: %s\n", p, answer.String())
	}
	return nil
}
