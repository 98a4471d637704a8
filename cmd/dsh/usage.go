package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/usage"
)

// The usage of a session is derived from its log on demand: each
// assistant/message event records its step's usage, provider and model,
// so a resumed session keeps its totals and nothing else is stored.

// usageOf returns the usage of a log, priced by cfg for agent ac.
func usageOf(cfg *config.Config, ac config.AgentConfig, events []session.Event) usage.Snapshot {
	acc := cfg.Account(ac)
	acc.AddAll(events)
	return usage.SnapshotOf(acc)
}

// sessionUsage returns the usage of an open session, from its history.
func sessionUsage(cfg *config.Config, ac config.AgentConfig, svc sessions.Service, id string) usage.Snapshot {
	evs, _ := svc.History(stdctx.Background(), id, 0)
	return usageOf(cfg, ac, evs)
}

// reportUsage ends a dsh run: the usage of its last turn and of the whole
// session, on diag as text, or with --json as one "session/usage" line on
// out after the session events.
func reportUsage(cfg *config.Config, ac config.AgentConfig, svc sessions.Service, id string, jsonOut bool, out, diag io.Writer) {
	u := sessionUsage(cfg, ac, svc, id)
	if jsonOut {
		b, err := json.Marshal(struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
			usage.Snapshot
		}{"session/usage", id, u})
		if err == nil {
			out.Write(append(b, '\n'))
		}
		return
	}
	if !reported(u) {
		return
	}
	fmt.Fprint(diag, usageLines(u, false))
}

// reported tells whether the model reported any tokens: a model that
// reports none (the offline scripted one, unless its replies say) leaves
// stderr without a line of zeros.
func reported(u usage.Snapshot) bool {
	c := u.Session
	return c.Steps > 0 && c.InputTokens+c.OutputTokens+c.ReasoningTokens > 0
}

// usageLines renders a snapshot for people: the turn and the session, and
// with steps the last step too.
func usageLines(u usage.Snapshot, step bool) string {
	if !step {
		u.Step = nil
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(usage.Text(u), "\n") {
		if line != "" {
			b.WriteString("usage: " + line)
		}
	}
	return b.String()
}

// interactiveUsage answers /usage, with the prompt after it unless a
// turn is running.
func interactiveUsage(cfg *config.Config, cur *current, busy bool) string {
	cur.mu.Lock()
	ac, id := cur.ac, cur.info.ID
	cur.mu.Unlock()
	text := "no model calls yet in this session\n"
	if u := sessionUsage(cfg, ac, cur.svc, id); u.Session.Steps > 0 {
		text = usageLines(u, true)
	}
	if !busy {
		text += "> "
	}
	return text
}

// reportSessionUsage ends an interactive session with the usage of the
// session it talked to last.
func reportSessionUsage(h *host.Host, cur *current, diag io.Writer) {
	cur.mu.Lock()
	ac, id := cur.ac, cur.info.ID
	cur.mu.Unlock()
	if u := sessionUsage(h.Config(), ac, cur.svc, id); reported(u) {
		u.Turn = nil
		fmt.Fprint(diag, usageLines(u, false))
	}
}
