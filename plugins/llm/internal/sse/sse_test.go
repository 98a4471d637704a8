package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func all(t *testing.T, in string) []Event {
	t.Helper()
	r := NewReader(strings.NewReader(in))
	var out []Event
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		e.Data = append([]byte(nil), e.Data...)
		out = append(out, e)
	}
}

func TestEvents(t *testing.T) {
	in := ": keep-alive\n\ndata: {\"a\":1}\n\nevent: message_start\ndata:{\"b\":2}\r\n\r\ndata: line1\ndata: line2\nid: 7\n\n\n\ndata: [DONE]"
	got := all(t, in)
	want := []Event{{Data: []byte(`{"a":1}`), Line: 3}, {Name: "message_start", Data: []byte(`{"b":2}`), Line: 6}, {Data: []byte("line1\nline2"), Line: 8}, {Data: []byte("[DONE]"), Line: 14}}
	if len(got) != len(want) {
		t.Fatalf("got %d events: %+v", len(got), got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || string(got[i].Data) != string(want[i].Data) || got[i].Line != want[i].Line {
			t.Fatalf("event %d: got %+v (%q), want %+v (%q)", i, got[i], got[i].Data, want[i], want[i].Data)
		}
	}
}

func TestLongLines(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	got := all(t, "data: "+big+"\n\n")
	if len(got) != 1 || len(got[0].Data) != len(big) {
		t.Fatal("a line longer than the buffer must still be read whole")
	}
	r := NewReader(strings.NewReader("data: " + strings.Repeat("y", MaxLine+10) + "\n\n"))
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("over the limit: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	for _, seed := range []string{"data: x\n\n", ": c\n\ndata: [DONE]\n\n", "event: e\ndata: 1\ndata: 2\r\n\r\n", "data", "\n\n\n", "data:\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(strings.NewReader(string(in)))
		for range 10000 {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}

// Data lines without the blank line that ends an event do not grow one
// event past MaxEvent.
func TestEndlessEvent(t *testing.T) {
	line := "data: " + strings.Repeat("z", 1<<20) + "\n"
	r := NewReader(strings.NewReader(strings.Repeat(line, MaxEvent>>20+2)))
	if _, err := r.Next(); !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "over 8388608 bytes") {
		t.Fatalf("got %v", err)
	}
}
