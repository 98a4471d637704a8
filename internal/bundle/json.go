package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// JSON reading with errors that name the field and what was found there.

// readJSONObject reads file (shown as name) as one JSON object.
func readJSONObject(p *problems, file, name string) (map[string]any, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		p.add(name, "", "cannot read: %v", unwrapPathErr(err))
		return nil, false
	}
	return decodeObject(p, data, name)
}

func decodeObject(p *problems, data []byte, name string) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		p.add(name, "", "not valid JSON: %v", err)
		return nil, false
	}
	if dec.More() {
		p.add(name, "", "not valid JSON: text after the top-level object")
		return nil, false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		p.add(name, "", "expected a JSON object, got %s", jsonKind(v))
		return nil, false
	}
	return obj, true
}

func strList(p *problems, file, at string, v any) []string {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		p.add(file, at, "expected a list of strings, got %s", jsonKind(v))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, el := range list {
		s, ok := el.(string)
		if !ok {
			p.add(file, fmt.Sprintf("%s[%d]", at, i), "expected a string, got %s", jsonKind(el))
			continue
		}
		out = append(out, s)
	}
	return out
}

func strMap(p *problems, file, at string, v any) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.add(file, at, "expected an object of strings, got %s", jsonKind(v))
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[k].(string)
		if !ok {
			p.add(file, at+"."+k, "expected a string, got %s", jsonKind(m[k]))
			continue
		}
		out[k] = s
	}
	return out
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case json.Number:
		return "the number " + x.String()
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// sortedNotes is notes in a stable order.
func sortedNotes(n []string) []string {
	slices.SortFunc(n, strings.Compare)
	return n
}
