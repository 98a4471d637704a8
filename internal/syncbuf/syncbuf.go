// Package syncbuf holds Buffer, a bytes.Buffer that one goroutine may read
// while others write to it: the log output or stderr a test captures from
// fibers, processes and servers that run on goroutines of their own.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer whose contents can be read while it is written.
// The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len returns how many bytes were written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
