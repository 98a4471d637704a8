package agentloop

import "github.com/dsh-go/dsh/services/llm"

// Inbox holds an agent's two FIFOs: queued messages start later turns, one
// each; steering messages join the running turn before its next step. It is
// guarded by its agent's lock.
type Inbox struct {
	queued   fifo
	steering fifo
}

type fifo struct{ items []llm.Message }

func (f *fifo) push(m llm.Message) { f.items = append(f.items, m) }

func (f *fifo) pop() (llm.Message, bool) {
	if len(f.items) == 0 {
		return llm.Message{}, false
	}
	m := f.items[0]
	f.items[0] = llm.Message{}
	f.items = f.items[1:]
	if len(f.items) == 0 {
		f.items = nil // let the array go; idle agents hold none
	}
	return m, true
}

func (f *fifo) drain() []llm.Message {
	out := f.items
	f.items = nil
	return out
}

func (f *fifo) len() int { return len(f.items) }
