package egress

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// ParsePolicy decodes a network setting as koanf hands it over from YAML,
// an environment override or a flag:
//
//	false | "off"   no network (also what nil, an unset key, means)
//	true  | "on"    every host on the internet
//	{allow: [...], deny: [...]}   only what allow covers and deny does not
//
// key is the key path of the value ("sandbox.network"); every error names
// it, with the index of a bad entry, and says how to fix it. The policy
// remembers key so refusals name it too.
func ParsePolicy(key string, v any) (Policy, error) {
	if key == "" {
		key = DefaultKey
	}
	p := Policy{Key: key}
	switch x := v.(type) {
	case nil:
		return p, nil
	case bool:
		if x {
			p.Mode = ModeOn
		}
		return p, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "off", "false":
			return p, nil
		case "on", "true":
			p.Mode = ModeOn
			return p, nil
		}
		return p, invalid(key, fmt.Sprintf("%s: %q is not a network setting; write off, on, or a map {allow: [example.com], deny: [...]}", key, clip(x)))
	}
	m, ok := asMap(v)
	if !ok {
		return p, invalid(key, fmt.Sprintf("%s: a %s is not a network setting; write off, on, or a map {allow: [example.com], deny: [...]}", key, kindOf(v)))
	}
	for _, k := range sortedKeys(m) {
		if k != "allow" && k != "deny" {
			return p, invalid(key, fmt.Sprintf("%s.%s: unknown key; the map takes allow and deny", key, k))
		}
	}
	var err error
	if p.Allow, err = parseList(key+".allow", m["allow"]); err != nil {
		return p, err
	}
	if p.Deny, err = parseList(key+".deny", m["deny"]); err != nil {
		return p, err
	}
	if len(p.Allow) == 0 {
		// An empty allow list would let nothing out, which off says more
		// plainly; a missing one is more likely a mistake than a wish.
		return p, invalid(key, fmt.Sprintf("%s.allow is empty, so nothing could be reached; list the hosts to allow (use [\"*\"] to allow all but the deny list), or set %s: off", key, key))
	}
	p.Mode = ModeAllowList
	return p, nil
}

// parseList parses a list of entries. A string is read as a
// comma-separated list, which is what an environment override gives.
func parseList(key string, v any) ([]Rule, error) {
	var items []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		for s := range strings.SplitSeq(x, ",") {
			if strings.TrimSpace(s) != "" {
				items = append(items, s)
			}
		}
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return nil, invalid(key, fmt.Sprintf("%s: a %s is not a list; write a list such as [example.com, \"*.example.org\"]", key, kindOf(v)))
		}
		for i := range rv.Len() {
			items = append(items, rv.Index(i).Interface())
		}
	}
	rules := make([]Rule, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, invalid(key, fmt.Sprintf("%s[%d]: a %s is not a host; write a string such as example.com (quote entries that start with *)", key, i, kindOf(it)))
		}
		r, err := ParseRule(s)
		if err != nil {
			return nil, invalid(key, fmt.Sprintf("%s[%d]: %v", key, i, err))
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func invalid(key, msg string) error {
	e := errs.New(PolicyInvalid, msg).WithReason("egress/bad-policy")
	e.Details = map[string]any{"key": key}
	return e
}

// asMap accepts the map shapes YAML decoders and koanf produce.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[fmt.Sprint(k)] = x
		}
		return out, true
	case map[string][]string:
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = x
		}
		return out, true
	}
	return nil, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func kindOf(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case string:
		return "string"
	case int, int64, uint64, float64, int32, uint, uint32, float32:
		return "number"
	case []any, []string:
		return "list"
	case map[string]any, map[any]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}
