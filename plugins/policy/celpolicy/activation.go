package celpolicy

import (
	"sync"
	"time"

	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// activation hands a rule its variables without building a map per
// evaluation: the rules of a stage share one.
type activation struct {
	request Request
	call    Call
	source  Source
	sources []Source
	params  ref.Val
	now     time.Time
}

// activations are reused: a message's evaluation allocates none.
var activations = sync.Pool{New: func() any { return new(activation) }}

// release clears a and returns it to the pool; nothing of a message stays
// reachable from it.
func (a *activation) release() {
	clear(a.sources)
	*a = activation{sources: a.sources[:0]}
	activations.Put(a)
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "request":
		return &a.request, true
	case "call":
		return &a.call, true
	case "source":
		return &a.source, true
	case "sources":
		return a.sources, true
	case "params":
		return a.params, true
	case "now":
		return a.now, true
	}
	return nil, false
}

// Parent implements interpreter.Activation: there is none.
func (a *activation) Parent() interpreter.Activation { return nil }
