package session

import "sync"

// Writers is a persistence plugin's book of the writers it has: those of
// the sessions it opened with its own lease, by session id, and those it
// adopted for sessions opened without it (the plugin came later, as in a
// preset), by session. Every backend keeps the same book, so it is kept
// once.
type Writers[W interface {
	comparable
	Lease
}] struct {
	mu      sync.Mutex
	held    map[string]W
	adopted map[*Session]W
}

// Hold records w as the writer of session id, opened with the plugin's
// lease.
func (ws *Writers[W]) Hold(id string, w W) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.held == nil {
		ws.held = map[string]W{}
	}
	ws.held[id] = w
}

// Holds reports whether the plugin holds session id.
func (ws *Writers[W]) Holds(id string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	_, ok := ws.held[id]
	return ok
}

// Adopt returns the writer adopted for s, making one with open on first
// use. open runs without the book's lock (it may take a lease); when
// another caller adopted s meanwhile, the writer open made is released and
// the other one returned.
func (ws *Writers[W]) Adopt(s *Session, open func() W) W {
	ws.mu.Lock()
	w, ok := ws.adopted[s]
	ws.mu.Unlock()
	if ok {
		return w
	}
	w = open()
	ws.mu.Lock()
	if again, ok := ws.adopted[s]; ok {
		ws.mu.Unlock()
		w.Release()
		return again
	}
	if ws.adopted == nil {
		ws.adopted = map[*Session]W{}
	}
	ws.adopted[s] = w
	ws.mu.Unlock()
	return w
}

// Forget drops a released writer, wherever it is recorded.
func (ws *Writers[W]) Forget(id string, w W) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.held[id] == w {
		delete(ws.held, id)
	}
	for s, x := range ws.adopted {
		if x == w {
			delete(ws.adopted, s)
		}
	}
}

// All returns every writer in the book once, for the plugin's close.
func (ws *Writers[W]) All() []W {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	seen := map[W]bool{}
	var out []W
	for _, w := range ws.held {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	for _, w := range ws.adopted {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
