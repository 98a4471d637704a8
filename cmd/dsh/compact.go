package main

import (
	"fmt"
	"io"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/session/compact"
	"github.com/dsh-go/dsh/services/agents"
)

// compactHelp is the /help line of /compact.
const compactHelp = "/compact     summarize the older turns before the next model request\n"

// compactNow asks session.compact to compact agent's history at its next
// model request: at once if a turn is running, else with the next prompt.
func compactNow(agent agents.Agent, out, diag io.Writer) {
	svc, err := compact.Key.Get(agent.Context())
	switch {
	case errs.HasCode(err, errs.ServiceUnavailable):
		fmt.Fprint(diag, "compaction needs the session.compact plugin; add `- use: session.compact` under plugins: in the config\n")
		return
	case err != nil:
		fmt.Fprintf(diag, "/compact: %v\n", err)
		return
	}
	svc.Request(agent.ID())
	if agent.Status() == agents.StatusRunning {
		fmt.Fprint(diag, "(compacting before the next step)\n")
		return
	}
	fmt.Fprint(diag, "(the history is compacted when the next prompt is sent)\n")
	fmt.Fprint(out, "> ")
}
