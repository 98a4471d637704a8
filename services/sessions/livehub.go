package sessions

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// LiveHubs is the HubFactory of services/sessions/live: what the host
// gives its controller, and what Attach's Stream needs. A refused prompt
// never becomes a session event; the hub carries it as a notice, kept for
// clients that attach later, so a client that reconnects learns that its
// prompt was refused and why.
func LiveHubs(a agents.Agent) (Hub, error) { return LiveHubsWith(live.Options{})(a) }

// LiveHubsWith is LiveHubs with the hubs' options: a smaller Buffer, a
// Loader for logs longer than the window.
func LiveHubsWith(opts live.Options) HubFactory {
	return func(a agents.Agent) (Hub, error) { return newLiveHub(a, opts) }
}

func newLiveHub(a agents.Agent, opts live.Options) (Hub, error) {
	h, err := live.New(a, opts)
	if err != nil {
		return nil, err
	}
	_, err = EventOutcome.On(a.Context(), func(_ stdctx.Context, o Outcome) error {
		h.Notice(live.Notice{Type: string(o.Kind), RequestID: o.RequestID, Code: string(o.Code), Reason: o.Reason, Message: o.Message})
		return nil
	})
	if err != nil {
		h.Close()
		return nil, err
	}
	return liveHub{h}, nil
}

// liveHub adapts a live.Hub to the controller's Hub.
type liveHub struct{ hub *live.Hub }

func (l liveHub) Attach(ctx stdctx.Context, o AttachOptions) (HubClient, error) {
	after := o.AfterSeq
	if o.FromEnd {
		after = l.hub.LastSeq()
	}
	c, err := l.hub.Attach(ctx, live.AttachOptions{AfterSeq: after, AfterNotice: o.AfterNotice, Approvals: o.Approvals, Name: o.Name})
	if err != nil {
		return nil, err
	}
	return LiveClient{c}, nil
}

func (l liveHub) Close() error {
	l.hub.Close()
	return nil
}

// LiveClient is the HubClient of LiveHubs: an attached live.Client.
type LiveClient struct{ c *live.Client }

// Live returns the live client (for callers not yet on Stream).
func (l LiveClient) Live() *live.Client { return l.c }

// Close detaches the client.
func (l LiveClient) Close() { l.c.Detach() }

// Next returns the client's next update.
func (l LiveClient) Next(ctx stdctx.Context) (live.Update, error) { return l.c.Next(ctx) }

// Answer answers an approval question.
func (l LiveClient) Answer(id int64, a approval.Answer) error { return l.c.Answer(id, a) }

// LastSeq is where to re-attach.
func (l LiveClient) LastSeq() int64 { return l.c.LastSeq() }

// streamClient is what a Stream needs of a HubClient.
type streamClient interface {
	HubClient
	Next(ctx stdctx.Context) (live.Update, error)
	Answer(id int64, a approval.Answer) error
	LastSeq() int64
}
