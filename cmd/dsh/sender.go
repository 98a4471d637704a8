package main

import (
	stdctx "context"
	"fmt"
	"io"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
)

// sender delivers the interactive session's lines one after the other, in
// typing order: a delivery can wait in admission, and lines delivered
// concurrently would race for the agent's inbox.
type sender struct {
	cur  *current
	diag io.Writer

	mu     sync.Mutex
	queue  []outgoing
	active bool // a delivery is under way
	wake   chan struct{}
	// settled is signalled each time a delivery has returned, so the UI
	// can prompt once nothing is under way.
	settled chan struct{}

	ctx    stdctx.Context
	cancel stdctx.CancelFunc
	done   chan struct{}
}

// outgoing names no session: a reload may replace the session while the
// line waits, and the line goes to the session current when it is sent.
type outgoing struct {
	text  string
	parts []llm.Part
	steer bool
}

func newSender(cur *current, diag io.Writer) *sender {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	s := &sender{cur: cur, diag: diag, wake: make(chan struct{}, 1), settled: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *sender) enqueue(text string, parts []llm.Part, steer bool) {
	s.mu.Lock()
	s.queue = append(s.queue, outgoing{text, parts, steer})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// waiting counts the lines not yet in the agent's inbox.
func (s *sender) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.queue)
	if s.active {
		n++
	}
	return n
}

// drop forgets the lines not yet handed to the controller, as a cancel
// drops what the agent has queued, and returns them: the screen said they
// were queued, so it says what became of them.
func (s *sender) drop() []outgoing {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	return q
}

// close stops the sender; a delivery waiting in admission is abandoned.
func (s *sender) close() {
	s.cancel()
	<-s.done
}

func (s *sender) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.active = false
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		o := s.queue[0]
		s.queue = s.queue[1:]
		s.active = true
		s.mu.Unlock()

		sess := s.cur.get()
		_, err := prompt(s.ctx, s.cur.svc, sess.ID, o.steer, o.text, o.parts)
		if s.ctx.Err() != nil {
			return
		}
		s.settle()
		switch {
		case err == nil, refused(err, s.diag, "> "):
		case errs.HasCode(err, sessions.MessageDropped):
			// A cancel withdrew it on its way in; the stream shows the
			// drop (message/dropped), as for a line already queued.
		case errs.HasCode(err, sessions.Closed):
			fmt.Fprintf(s.diag, "dsh: agent %s is gone after a config reload; not sent: %s\n> ", sess.AgentID, oneLine(o.text, 80))
		default:
			fmt.Fprintf(s.diag, "dsh: %v\n> ", err)
		}
	}
}

// settle marks the delivery under way as done and tells the UI, which may
// owe the prompt of a turn that ended meanwhile.
func (s *sender) settle() {
	s.mu.Lock()
	s.active = false
	s.mu.Unlock()
	select {
	case s.settled <- struct{}{}:
	default:
	}
}
