package main

import (
	stdctx "context"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/plugins/session/compact"
)

// compactHelp is the /help line of /compact.
const compactHelp = "/compact     summarize the older turns before the next model request\n"

// compactNow asks session.compact to compact agent's history at its next
// model request: at once if a turn is running, else with the next prompt.
// busy is the session's own view (the one that decides whether it shows a
// prompt), not the agent's status, which lags the end of a turn.
func compactNow(h *host.Host, agentID string, busy bool, out, diag io.Writer) {
	svc, err := compact.Key.Get(h.Root())
	switch {
	case errs.HasCode(err, errs.ServiceUnavailable):
		fmt.Fprint(diag, "compaction needs the session.compact plugin; add `- use: session.compact` under plugins: in the config\n")
		return
	case err != nil:
		fmt.Fprintf(diag, "/compact: %v\n", err)
		return
	}
	svc.Request(agentID)
	if busy {
		fmt.Fprint(diag, "(compacting before the next step)\n")
		return
	}
	fmt.Fprint(diag, "(the history is compacted when the next prompt is sent)\n")
	fmt.Fprint(out, "> ")
}

// followCompactions says on diag when a summary request starts, since a
// real model takes a while to write it; the recorded event says how it
// ended.
func followCompactions(h *host.Host, agentID string, diag io.Writer) (off func(), err error) {
	// session.compact is a root plugin: its events are heard at the root,
	// for the agent of the session shown.
	offStarted, err := compact.EventStarted.On(h.Root(), func(_ stdctx.Context, s compact.Started) error {
		if s.Agent == nil || s.Agent.ID() != agentID {
			return nil
		}
		fmt.Fprintf(diag, "(compacting %d messages, about %s tokens…)\n", s.Messages, kilo(s.Tokens))
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A /compact that finds nothing to do ends here, not in the log.
	offDone, err := compact.EventDone.On(h.Root(), func(_ stdctx.Context, d compact.Done) error {
		if d.Agent == nil || d.Agent.ID() != agentID {
			return nil
		}
		if errs.HasCode(d.Err, compact.Nothing) {
			fmt.Fprintf(diag, "(not compacted: %s)\n", strings.TrimPrefix(d.Err.Error(), string(compact.Nothing)+": "))
		}
		return nil
	})
	if err != nil {
		offStarted()
		return nil, err
	}
	return func() { offStarted(); offDone() }, nil
}

// kilo writes n as 950, 1.2k or 34k.
func kilo(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 10000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%dk", (n+500)/1000)
}
