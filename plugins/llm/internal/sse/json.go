package sse

import (
	"encoding/json"
	"errors"
	"io"
)

// JSONDecoder decodes the JSON data of one event after another. Unlike
// json.Unmarshal it keeps its scanner and decode state between events, which
// saves most of the allocations per streamed chunk.
type JSONDecoder struct {
	dec  *json.Decoder
	feed feed
}

// feed hands the decoder one event's data at a time.
type feed struct{ b []byte }

func (f *feed) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// Decode decodes data, which must hold exactly one JSON value, into v.
func (d *JSONDecoder) Decode(data []byte, v any) error {
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.feed)
	}
	d.feed.b = data
	err := d.dec.Decode(v)
	if err == nil && (len(d.feed.b) > 0 || d.dec.More()) {
		err = errors.New("more than one JSON value in the event")
	}
	if err != nil {
		d.dec = nil // a json.Decoder that failed stays failed
	}
	return err
}
