package attachments

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// memory is the backend of a store for sessions that are not persisted:
// what it holds goes with the process.
type memory struct {
	mu    sync.Mutex
	data  map[string][]byte
	refer map[string]map[string]bool
}

func newMemory() *memory {
	return &memory{data: map[string][]byte{}, refer: map[string]map[string]bool{}}
}

func (m *memory) Lock() (func(), error) { m.mu.Lock(); return m.mu.Unlock, nil }

func (m *memory) WriteBlob(hex string, data []byte) (int64, error) {
	if _, ok := m.data[hex]; ok {
		return 0, nil
	}
	m.data[hex] = slices.Clone(data)
	return int64(len(data)), nil
}

func (m *memory) ReadBlob(hex string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.data[hex]
	if !ok {
		return nil, errs.New(NotFound, fmt.Sprintf("attachment sha256:%s is not in the in-memory store; it was released, or the session was written by another process", hex))
	}
	return d, nil
}

func (m *memory) HasBlob(hex string) error {
	if _, ok := m.data[hex]; !ok {
		return errs.New(NotFound, fmt.Sprintf("attachment sha256:%s is not in the in-memory store; it was released", hex))
	}
	return nil
}

func (m *memory) RemoveBlob(hex string) error { delete(m.data, hex); return nil }

func (m *memory) Blobs() ([]string, error) { return slices.Collect(maps.Keys(m.data)), nil }

func (m *memory) AddRef(hex, session string) (bool, error) {
	r := m.refer[hex]
	if r == nil {
		r = map[string]bool{}
		m.refer[hex] = r
	}
	if _, ok := r[session]; ok {
		return false, nil
	}
	r[session] = false
	return true, nil
}

func (m *memory) RemoveRef(hex, session string) error {
	delete(m.refer[hex], session)
	if len(m.refer[hex]) == 0 {
		delete(m.refer, hex)
	}
	return nil
}

func (m *memory) Refs(hex string) (map[string]bool, error) { return maps.Clone(m.refer[hex]), nil }

func (m *memory) SessionBlobs(session string) ([]string, error) {
	var out []string
	for h, r := range m.refer {
		if _, ok := r[session]; ok {
			out = append(out, h)
		}
	}
	return out, nil
}

func (m *memory) Verify(hex, session string) error {
	if r := m.refer[hex]; r != nil {
		r[session] = true
	}
	return nil
}

func (m *memory) Sweep() error { return nil }

// age: an in-memory store lives as long as its process, so every marker
// it holds was made by a delivery of this process, which Collect sees as
// a hold; the others are as old as can be.
func (m *memory) Age(string, string) time.Duration { return math.MaxInt64 }

func (m *memory) Usage() (int64, error) {
	var total int64
	for _, b := range m.data {
		total += int64(len(b))
	}
	return total, nil
}
