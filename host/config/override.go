package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/internal/lazyregexp"
	yamlv3 "go.yaml.in/yaml/v3"
)

// overrideValue is the text of a --set or DSH_ override, kept as text until
// decoding meets the field it lands on: a string field takes it verbatim
// ("#1 rule: be brief" is not a YAML comment, "Note: x" is not a mapping),
// a number, bool or duration field parses it, and only a list, mapping or
// struct field reads it as YAML.
type overrideValue struct {
	text   string
	source string // "--set agents.main.model" or "environment variable DSH_…"
}

// overrideError is a value that does not fit its field; it names the flag
// or variable, never a line of the file.
type overrideError struct {
	source string
	msg    string
}

func (e *overrideError) Error() string { return e.source + ": " + e.msg }

// overrideHook converts overrideValues by their target type. With keep,
// a value landing in an untyped slot (a plugin entry's config map) stays an
// overrideValue, so the plugin's own config type decides later.
func overrideHook(keep bool) func(from, to reflect.Type, data any) (any, error) {
	return func(_, to reflect.Type, data any) (any, error) {
		ov, ok := data.(overrideValue)
		if !ok {
			return data, nil
		}
		fail := func(what string) (any, error) {
			return nil, &overrideError{ov.source, fmt.Sprintf("expected %s, got %q", what, ov.text)}
		}
		text := strings.TrimSpace(ov.text)
		if to == durationType {
			d, err := time.ParseDuration(text)
			if err != nil {
				return fail(describeType(to))
			}
			return d, nil
		}
		switch to.Kind() {
		case reflect.String:
			return ov.text, nil
		case reflect.Bool:
			b, err := strconv.ParseBool(text)
			if err != nil {
				return fail(describeType(to))
			}
			return b, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, err := strconv.ParseInt(text, 10, to.Bits())
			if err != nil {
				return fail(describeType(to))
			}
			return n, nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			n, err := strconv.ParseUint(text, 10, to.Bits())
			if err != nil {
				return fail(describeType(to))
			}
			return n, nil
		case reflect.Float32, reflect.Float64:
			f, err := strconv.ParseFloat(text, to.Bits())
			if err != nil {
				return fail(describeType(to))
			}
			return f, nil
		case reflect.Pointer:
			return data, nil // decoded again at the element type
		case reflect.Interface:
			if keep {
				return data, nil
			}
			return untyped(ov.text), nil
		}
		// A list, mapping or struct is written in YAML flow style.
		var v any
		if err := yamlv3.Unmarshal([]byte(ov.text), &v); err != nil {
			return fail(describeType(to) + " in YAML flow style such as [a, b] or {key: value}")
		}
		return v, nil
	}
}

// plainScalar matches the texts an untyped slot takes as numbers or bools.
var plainScalar = lazyregexp.New(`^(true|false|-?[0-9]+(\.[0-9]+)?)$`)

// untyped guesses the value of an override whose target type is unknown
// (the config of a plugin binary): a plain number or bool, a YAML flow list
// or mapping, otherwise the text as is.
func untyped(text string) any {
	t := strings.TrimSpace(text)
	switch {
	case plainScalar.MatchString(t):
		var v any
		if yamlv3.Unmarshal([]byte(t), &v) == nil {
			return v
		}
	case strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{"):
		var v any
		if yamlv3.Unmarshal([]byte(t), &v) == nil {
			return v
		}
	}
	return text
}

// resolveUntyped replaces the overrideValues left in an untyped tree.
func resolveUntyped(v any) any {
	switch x := v.(type) {
	case overrideValue:
		return untyped(x.text)
	case map[string]any:
		for k, el := range x {
			x[k] = resolveUntyped(el)
		}
	case []any:
		for i, el := range x {
			x[i] = resolveUntyped(el)
		}
	}
	return v
}

// override sets an overrideValue at path in raw and returns the key path it
// landed on ("agents[0].model"). Path segments walk mappings by key and
// lists by index or by the id of an element.
func override(raw map[string]any, path []string, value, source string) (string, error) {
	v := overrideValue{text: value, source: source}
	var cur any = raw
	at := ""
	for i, seg := range path {
		last := i == len(path)-1
		switch node := cur.(type) {
		case map[string]any:
			at = joinPath(at, seg)
			if last {
				node[seg] = v
				return at, nil
			}
			next, ok := node[seg]
			if !ok {
				next = map[string]any{}
				node[seg] = next
			}
			cur = next
		case []any:
			idx := -1
			if n, err := strconv.Atoi(seg); err == nil && n >= 0 && n < len(node) {
				idx = n
			} else {
				for j, el := range node {
					if m, ok := el.(map[string]any); ok && fmt.Sprint(m["id"]) == seg {
						idx = j
					}
				}
			}
			if idx < 0 {
				return "", fmt.Errorf("no list element with index or id %q under %s", seg, strings.Join(path[:i], "."))
			}
			at = fmt.Sprintf("%s[%d]", at, idx)
			if last {
				node[idx] = v
				return at, nil
			}
			cur = node[idx]
		default:
			return "", fmt.Errorf("%s is a single value, not a mapping or list", strings.Join(path[:i], "."))
		}
	}
	return at, nil
}

// mapKey matches a mapstructure map-key segment ("[careful]"), which the
// line index and overrides write as ".careful".
var mapKey = lazyregexp.New(`\[([^0-9\]][^\]]*)\]`)

func normalPath(path string) string { return mapKey.ReplaceAllString(path, ".$1") }
