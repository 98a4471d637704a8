package sessions

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/agents"
)

// Hub serves one session's live events and approvals to the clients
// attached to it (services/sessions/live implements it). The controller
// makes one per session through Options.NewHub and closes it when the
// session closes, after the agent is disposed, so the hub sees the last
// events.
type Hub interface {
	// Attach starts a client's stream with the durable events after
	// o.AfterSeq (and, with o.Approvals, makes the client an answerer of
	// the agent's approvals); see the live event contract in the package
	// documentation.
	Attach(ctx stdctx.Context, o AttachOptions) (HubClient, error)
	// Close drops every client and lets go of the agent.
	Close() error
}

// HubClient is one attached stream; Close ends it. A hub's own client type
// carries the stream (the host's live adapter returns one whose Live method
// gives the *live.Client: Next, Answer, LastSeq).
type HubClient interface {
	Close()
}

// HubFactory makes the hub of a session's agent, in the agent's scope.
type HubFactory func(agent agents.Agent) (Hub, error)
