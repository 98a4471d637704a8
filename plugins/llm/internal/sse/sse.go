// Package sse reads Server-Sent Events as model APIs stream them: "data:"
// lines (joined when an event has several), an optional "event:" name,
// comments as keep-alives, and a blank line ending each event. It is
// lenient where real servers differ (CRLF, no space after the colon, a last
// event without its blank line) and strict about what it returns: a line
// longer than the limit is an error, not a silent cut.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLine bounds one line of the stream, and MaxEvent the data of one
// event, its "data:" lines joined: a server that sends data lines without
// the blank line that ends an event must not grow one event forever.
const (
	MaxLine  = 4 << 20
	MaxEvent = 8 << 20
)

// Event is one server-sent event.
type Event struct {
	// Name is the "event:" field ("" when absent).
	Name string
	// Data is the "data:" lines joined by newlines. It is only valid until
	// the next call to Next.
	Data []byte
	// Line is the stream line number where the event's data began, for
	// error messages.
	Line int
}

// Reader reads events from a stream.
type Reader struct {
	r    *bufio.Reader
	line int
	data []byte
	name string
	long []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ErrLineTooLong reports a line over MaxLine, or an event over MaxEvent.
var ErrLineTooLong = errors.New("sse: line too long")

// Next returns the next event. It returns io.EOF when the stream ends at an
// event boundary and io.ErrUnexpectedEOF when it ends inside an event.
func (r *Reader) Next() (Event, error) {
	r.data = r.data[:0]
	r.name = ""
	start, has := 0, false
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && has {
				// A last event without its blank line still counts.
				return Event{Name: r.name, Data: r.data, Line: start}, nil
			}
			if err == io.EOF && len(line) == 0 {
				return Event{}, io.EOF
			}
			if err != io.EOF {
				return Event{}, err
			}
		}
		if len(line) == 0 {
			if err == io.EOF {
				return Event{}, io.EOF
			}
			if has {
				return Event{Name: r.name, Data: r.data, Line: start}, nil
			}
			continue // blank lines between events
		}
		if line[0] == ':' {
			continue // a comment: keep-alive
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if len(r.data)+1+len(value) > MaxEvent {
				return Event{}, fmt.Errorf("%w: the event that began at line %d holds over %d bytes of data", ErrLineTooLong, start, MaxEvent)
			}
			if has {
				r.data = append(r.data, '\n')
			} else {
				start = r.line
			}
			r.data = append(r.data, value...)
			has = true
		case "event":
			r.name = string(value)
		}
		// id, retry and unknown fields are ignored, as the spec says.
		if err == io.EOF {
			if has {
				return Event{Name: r.name, Data: r.data, Line: start}, nil
			}
			return Event{}, io.EOF
		}
	}
}

// readLine returns one line without its line ending.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull && len(r.long) <= MaxLine {
			line, err = r.r.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		if len(r.long) > MaxLine {
			return nil, fmt.Errorf("%w (over %d bytes at line %d)", ErrLineTooLong, MaxLine, r.line+1)
		}
		line = r.long
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	r.line++
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, err
}
