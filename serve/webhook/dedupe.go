package webhook

import (
	"sync"

	"github.com/dsh-go/dsh/serve/unattended"
)

// maxRemembered bounds the deliveries remembered for redelivery: senders
// redeliver within hours, not after thousands of others.
const maxRemembered = 4096

// accepted is the answer to a delivery, given again to a redelivery.
type accepted struct {
	Session   string `json:"session"`
	MessageID string `json:"message_id"`
	RequestID string `json:"request_id"`
}

func newAccepted(d unattended.Delivery, requestID string) accepted {
	return accepted{Session: d.Session, MessageID: d.MessageID, RequestID: requestID}
}

// flight is one delivery by request id: in progress until done closes,
// then ok says whether it was accepted.
type flight struct {
	done chan struct{}
	ok   bool
	resp accepted
}

// dedupe remembers the accepted deliveries so concurrent copies and
// recent redeliveries (the same request id) are answered as the first was
// without a trip to the store. It is a cache, not the record: the record is
// the session log, which holds the request id with the prompt, in the
// webhook's session or in the delivery's own session named after the body
// (ownSessionID), so it outlives the process. A remembered answer is
// checked against the log of its session while that is open here, so a
// delivery a cancel dropped is not answered 202 from memory.
type dedupe struct {
	mu      sync.Mutex
	limit   int
	flights map[string]*flight
	order   []string // accepted ids, oldest first
}

func newDedupe(limit int) *dedupe {
	return &dedupe{limit: limit, flights: map[string]*flight{}}
}

// claim returns the flight of id and whether the caller owns it (it must
// then call finish); otherwise the caller waits on its done.
func (d *dedupe) claim(id string) (*flight, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.flights[id]; ok {
		return f, false
	}
	f := &flight{done: make(chan struct{})}
	d.flights[id] = f
	return f, true
}

// finish ends the owner's flight: an accepted one is remembered, a failed
// one forgotten so a redelivery tries again.
func (d *dedupe) finish(id string, f *flight, resp accepted, ok bool) {
	d.mu.Lock()
	f.ok, f.resp = ok, resp
	if ok {
		d.order = append(d.order, id)
		if len(d.order) > d.limit {
			delete(d.flights, d.order[0])
			d.order = d.order[1:]
		}
	} else {
		delete(d.flights, id)
	}
	d.mu.Unlock()
	close(f.done)
}
