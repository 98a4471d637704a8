package budget

import (
	stdctx "context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// value is one counter: an amount of tokens, cost or prompts (V, within
// the window that starts at W, Unix seconds, 0 for a limit without a
// window), or the concurrent-turns slots taken (S). An amount of an
// earlier window reads as zero, so one entry per counter suffices and
// nothing needs expiring.
type value struct {
	W int64   `json:"w,omitempty"`
	V float64 `json:"v,omitempty"`
	S []slot  `json:"s,omitempty"`
}

// slot is a prompt admitted and not done, counting until Until (Unix
// seconds), so the slots of a host that died free themselves after
// slot_ttl.
type slot struct {
	ID    string `json:"id"`
	Until int64  `json:"until"`
}

// amount is v's amount in the window that starts at w.
func (v value) amount(w int64) float64 {
	if v.W != w {
		return 0
	}
	return v.V
}

// live is v's slots that have not expired at now, in a slice of their own.
func (v value) live(now time.Time) []slot {
	return slices.DeleteFunc(slices.Clone(v.S), func(s slot) bool { return s.Until <= now.Unix() })
}

// store keeps the counters. update is the one write: it applies fn to a
// key's value (the zero value when the key has none) and stores what fn
// returns, atomically — the nats store by compare-and-set on the entry's
// revision, retried when another host wrote in between. fn may run more
// than once, and must not change the value it is given; write false
// leaves the entry as it is.
type store interface {
	get(ctx stdctx.Context, key string) (value, error)
	update(ctx stdctx.Context, key string, fn func(old value) (val value, write bool, err error)) error
	close()
}

// memStore is the memory store: counters of this process only.
type memStore struct {
	mu sync.Mutex
	m  map[string]value
}

func newMemStore() *memStore { return &memStore{m: map[string]value{}} }

func (s *memStore) get(_ stdctx.Context, key string) (value, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], nil
}

func (s *memStore) update(_ stdctx.Context, key string, fn func(value) (value, bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	val, write, err := fn(s.m[key])
	if err == nil && write {
		s.m[key] = val
	}
	return err
}

func (s *memStore) close() {}

// decode reads an entry of the nats store; one that is not a counter of
// this code reads as zero, and is replaced by the next write.
func decode(b []byte) value {
	var v value
	if len(b) > 0 && json.Unmarshal(b, &v) != nil {
		return value{}
	}
	return v
}

func encodeValue(v value) []byte {
	b, _ := json.Marshal(v)
	return b
}
