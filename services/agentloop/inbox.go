package agentloop

import "github.com/dsh-go/dsh/services/llm"

// Inbox holds an agent's two FIFOs: queued messages start the next turn,
// all that are queued when it starts going into it together; steering
// messages join the running turn before its next step. It is guarded by its
// agent's lock.
type Inbox struct {
	queued   fifo
	steering fifo
}

type fifo struct{ items []llm.Message }

func (f *fifo) push(m llm.Message) { f.items = append(f.items, m) }

func (f *fifo) drain() []llm.Message {
	out := f.items
	f.items = nil
	return out
}

func (f *fifo) len() int { return len(f.items) }
