package cluster

import (
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// replies takes the answers to this host's forwarded requests on one
// subscription for the host's life, each request's under a token of its
// own. A subscription per request, as a forward had, costs a SUB and an
// UNSUB that the server applies to its subscription index, and a channel,
// a subscription and an inbox on this side: most of what a forward cost
// over a bare request/reply.
type replies struct {
	prefix string // the subscription's subject without its last token
	sub    *nats.Subscription

	mu   sync.Mutex
	next uint64
	m    map[string]chan *nats.Msg
}

// open subscribes on nc; the subscription ends with the connection.
func (r *replies) open(nc *nats.Conn) error {
	r.prefix = nc.NewInbox() + "."
	r.m = map[string]chan *nats.Msg{}
	var err error
	r.sub, err = nc.Subscribe(r.prefix+"*", r.deliver)
	return err
}

// await returns the subject a request's answers go to, their channel, and
// the function that stops taking them.
func (r *replies) await() (string, <-chan *nats.Msg, func()) {
	// A forward reads its answers as they come; a few buffered cover the
	// "working" replies around the final one.
	ch := make(chan *nats.Msg, 4)
	r.mu.Lock()
	r.next++
	token := strconv.FormatUint(r.next, 36)
	r.m[token] = ch
	r.mu.Unlock()
	return r.prefix + token, ch, func() {
		r.mu.Lock()
		delete(r.m, token)
		r.mu.Unlock()
	}
}

// deliver hands m to the request it answers. It never blocks the
// subscription: an answer for a request given up on, or one more
// "working" than a stalled reader takes, is dropped.
func (r *replies) deliver(m *nats.Msg) {
	token := m.Subject[len(r.prefix):]
	r.mu.Lock()
	ch := r.m[token]
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- m:
	default:
	}
}
