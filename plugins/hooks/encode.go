package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// encode is json.Marshal without HTML escaping: Claude Code writes hook
// input with JSON.stringify, which leaves <, > and & as they are, and a
// guard that greps its raw input for "> /etc" or "&&" must see them. Raw
// messages inside v (tool arguments) go through plain first, because the
// model's arguments may arrive with those characters escaped already.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// plain rewrites a JSON document with every string written out without
// HTML escapes (\u003e becomes >), keeping the order of object keys and
// the text of numbers. Anything that is not one valid JSON value is
// returned as it is.
func plain(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(`\u`)) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	if err := copyValue(dec, &out); err != nil {
		return raw
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return raw
	}
	return out.Bytes()
}

// copyValue writes the next value of dec to out.
func copyValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		closing := byte('}')
		if t == '[' {
			closing = ']'
		}
		out.WriteByte(byte(t))
		for first := true; dec.More(); first = false {
			if !first {
				out.WriteByte(',')
			}
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				if err := writeScalar(out, key); err != nil {
					return err
				}
				out.WriteByte(':')
			}
			if err := copyValue(dec, out); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		out.WriteByte(closing)
		return nil
	default:
		return writeScalar(out, tok)
	}
}

func writeScalar(out *bytes.Buffer, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	out.Write(b)
	return nil
}
