package budget

import (
	stdctx "context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// store keeps the counters. update is the one write: it applies fn to a
// key's value (nil when the key has none) and stores what fn returns,
// atomically — the nats store by compare-and-set on the entry's revision,
// retried when another host wrote in between. fn may run more than once;
// write false leaves the entry as it is.
type store interface {
	get(ctx stdctx.Context, key string) ([]byte, error)
	update(ctx stdctx.Context, key string, fn func(old []byte) (val []byte, write bool, err error)) error
	close()
}

// memStore is the memory store: counters of this process only.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) get(_ stdctx.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], nil
}

func (s *memStore) update(_ stdctx.Context, key string, fn func([]byte) ([]byte, bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	val, write, err := fn(s.m[key])
	if err == nil && write {
		s.m[key] = val
	}
	return err
}

func (s *memStore) close() {}

// amount is a counter of tokens, cost or prompts: V within the window
// that starts at W (Unix seconds; 0 for a limit without a window). A value
// of an earlier window reads as zero, so one entry per counter suffices
// and nothing needs expiring.
type amount struct {
	W int64   `json:"w"`
	V float64 `json:"v"`
}

func readAmount(b []byte, window int64) float64 {
	var a amount
	if len(b) == 0 || json.Unmarshal(b, &a) != nil || a.W != window {
		return 0
	}
	return a.V
}

func (a amount) bytes() []byte {
	b, _ := json.Marshal(a)
	return b
}

// slots are the concurrent-turns slots taken: one per prompt admitted and
// not yet done, each counting until its Until (Unix seconds), so the slots
// of a host that died free themselves after slot_ttl.
type slots struct {
	S []slot `json:"s"`
}

type slot struct {
	ID    string `json:"id"`
	Until int64  `json:"until"`
}

func readSlots(b []byte, now time.Time) slots {
	var s slots
	if len(b) > 0 && json.Unmarshal(b, &s) == nil {
		s.S = slices.DeleteFunc(s.S, func(x slot) bool { return x.Until <= now.Unix() })
	}
	return s
}

func (s slots) bytes() []byte {
	b, _ := json.Marshal(s)
	return b
}
