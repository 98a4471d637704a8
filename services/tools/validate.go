package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/google/jsonschema-go/jsonschema"
)

// The validator is google/jsonschema-go, the one the MCP Go SDK uses for
// the same job, so tools from MCP servers and built-in tools are judged
// alike. santhosh-tekuri/jsonschema was tried first: it compiles every
// draft's meta-schema in its package init, which added about 10 ms to
// every start of dsh, a quarter of its cold start.

// maxProblems bounds the problems one result lists: the first few are
// enough to fix a call, and a wildly wrong call must not flood the context.
const maxProblems = 5

// compiled is a tool's parameters schema, resolved once at registration.
type compiled struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// jsonTypes are the type names a schema may use.
var jsonTypes = []string{"null", "boolean", "object", "array", "number", "string", "integer"}

// schemaCache shares resolved schemas between registrations of the same
// text: every agent whose preset mounts the file tools registers the same
// six schemas, and resolving them was most of the cost of opening such an
// agent. A resolved schema is only read after it is built, so sharing it
// is safe. The cache is bounded so tools with ever-new schemas (from MCP
// servers, say) cannot grow it without end; past the bound, schemas are
// resolved per registration as before.
var schemaCache struct {
	sync.Mutex
	m map[string]*compiled
}

const schemaCacheMax = 512

// compileSchema resolves a tool's parameters once, at registration. A
// schema may not load anything from outside itself: a $ref to a file or a
// URL is a registration error, not a read at call time.
func compileSchema(tool string, raw json.RawMessage) (*compiled, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	schemaCache.Lock()
	c, ok := schemaCache.m[string(raw)]
	schemaCache.Unlock()
	if ok {
		return c, nil
	}
	c, err := resolveSchema(tool, raw)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if schemaCache.m == nil {
		schemaCache.m = map[string]*compiled{}
	}
	if len(schemaCache.m) < schemaCacheMax {
		schemaCache.m[string(raw)] = c
	}
	schemaCache.Unlock()
	return c, nil
}

func resolveSchema(tool string, raw json.RawMessage) (*compiled, error) {
	bad := func(err error) error {
		return errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf(
			"tools.Register: the parameters schema of %q is not a valid JSON schema (draft 2020-12, self-contained); fix the schema the tool declares", tool))
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, bad(err)
	}
	if err := checkTypes(&s, "#"); err != nil {
		return nil, bad(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, bad(err)
	}
	return &compiled{schema: &s, resolved: r}, nil
}

// checkTypes refuses type names outside JSON's, which the validator would
// otherwise accept and then match nothing against.
func checkTypes(s *jsonschema.Schema, at string) error {
	if s == nil {
		return nil
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !slices.Contains(jsonTypes, t) {
			return fmt.Errorf("%s: type %q is not one of %s", at, t, strings.Join(jsonTypes, ", "))
		}
	}
	for name, p := range s.Properties {
		if err := checkTypes(p, at+"/properties/"+name); err != nil {
			return err
		}
	}
	for i, sub := range slices.Concat(s.PrefixItems, s.AllOf, s.AnyOf, s.OneOf) {
		if err := checkTypes(sub, fmt.Sprintf("%s/[%d]", at, i)); err != nil {
			return err
		}
	}
	for _, sub := range []*jsonschema.Schema{s.Items, s.AdditionalProperties, s.Not} {
		if err := checkTypes(sub, at); err != nil {
			return err
		}
	}
	return nil
}

// emptyObject stands for arguments a model left out: a call without
// arguments means "no arguments", {}. Each call gets its own copy, so a
// tool that writes into its arguments cannot change another call's.
func emptyObject() json.RawMessage { return json.RawMessage(`{}`) }

// validate checks call's arguments against the tool's schema. ok is false
// when they do not fit; the result then tells the model what to fix.
func validate(c *compiled, call Call) (r Result, ok bool) {
	if c == nil {
		if json.Valid(call.Arguments) {
			return Result{}, true
		}
		return notJSON(call, nil), false
	}
	var v any
	if err := json.Unmarshal(call.Arguments, &v); err != nil {
		return notJSON(call, err), false
	}
	err := c.resolved.Validate(v)
	if err == nil {
		return Result{}, true
	}
	// The validator stops at the first problem and words it for schema
	// authors; explain words every problem it can find by the argument it
	// is about, and the validator's own text covers the rest.
	var problems []string
	explain(c.schema, v, nil, &problems)
	if len(problems) == 0 {
		problems = append(problems, strings.TrimPrefix(err.Error(), "validating root: "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Invalid arguments for tool %q; the call did not run:\n", call.Name)
	for i, p := range problems {
		if i == maxProblems {
			fmt.Fprintf(&b, "- and %d more\n", len(problems)-maxProblems)
			break
		}
		b.WriteString("- ")
		b.WriteString(p)
		b.WriteByte('\n')
	}
	b.WriteString("Fix these arguments to match the tool's parameters and call it again.")
	return Result{Content: b.String(), IsError: true}, false
}

func notJSON(call Call, err error) Result {
	why := ""
	if err != nil {
		why = " (" + err.Error() + ")"
	}
	return Result{Content: fmt.Sprintf(
		"Invalid arguments for tool %q: they are not valid JSON%s; the call did not run. Send the arguments as one JSON object matching the tool's parameters.",
		call.Name, why), IsError: true}
}

// explain walks the schema beside the value and words each problem of the
// keywords tool schemas use: type, required, properties and
// additionalProperties, items, bounds and enum.
func explain(s *jsonschema.Schema, v any, at []string, out *[]string) {
	if s == nil {
		return
	}
	if want := typesOf(s); len(want) > 0 && !fits(v, want) {
		got := typeOf(v)
		if got == "integer" {
			got = "number" // wrong either way; "integer" would read as a reason
		}
		*out = append(*out, fmt.Sprintf("%s must be %s, not %s", subject(at), strings.Join(want, " or "), got))
		return
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return equalJSON(e, v) }) {
		*out = append(*out, fmt.Sprintf("%s must be one of %s", subject(at), compact(s.Enum)))
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := x[name]; !ok {
				*out = append(*out, fmt.Sprintf("%s is required but missing", quote(child(at, name))))
			}
		}
		for _, name := range sortedKeys(x) {
			if p, ok := s.Properties[name]; ok {
				explain(p, x[name], append(at[:len(at):len(at)], name), out)
				continue
			}
			if ap := s.AdditionalProperties; ap != nil {
				if ap.Not != nil && isEmpty(ap.Not) {
					*out = append(*out, fmt.Sprintf("%s is not a parameter of this tool; remove it", quote(child(at, name))))
					continue
				}
				explain(ap, x[name], append(at[:len(at):len(at)], name), out)
			}
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			*out = append(*out, fmt.Sprintf("%s must have at least %d items, not %d", subject(at), *s.MinItems, len(x)))
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			*out = append(*out, fmt.Sprintf("%s must have at most %d items, not %d", subject(at), *s.MaxItems, len(x)))
		}
		for i, item := range x {
			if s.Items != nil {
				explain(s.Items, item, append(at[:len(at):len(at)], strconv.Itoa(i)), out)
			}
		}
	case string:
		n := len([]rune(x))
		if s.MinLength != nil && n < *s.MinLength {
			*out = append(*out, fmt.Sprintf("%s must have at least %d characters, not %d", subject(at), *s.MinLength, n))
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			*out = append(*out, fmt.Sprintf("%s must have at most %d characters, not %d", subject(at), *s.MaxLength, n))
		}
	case float64:
		bound := func(limit *float64, bad func(a, b float64) bool, words string) {
			if limit != nil && bad(x, *limit) {
				*out = append(*out, fmt.Sprintf("%s must be %s %s, not %s", subject(at), words, num(*limit), num(x)))
			}
		}
		bound(s.Minimum, func(a, b float64) bool { return a < b }, "at least")
		bound(s.Maximum, func(a, b float64) bool { return a > b }, "at most")
		bound(s.ExclusiveMinimum, func(a, b float64) bool { return a <= b }, "more than")
		bound(s.ExclusiveMaximum, func(a, b float64) bool { return a >= b }, "less than")
	}
}

func typesOf(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

// fits reports whether v is of one of the JSON types want; an integer is
// a number without a fraction.
func fits(v any, want []string) bool {
	got := typeOf(v)
	for _, w := range want {
		if w == got || (w == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// isEmpty reports whether s is the schema every value fits, so that
// {"not": s} — how the library reads `false` — refuses every value.
func isEmpty(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && string(b) == "true"
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// argPath renders a location inside the arguments as a model would write
// it: options.limit, edits[2].old_string.
func argPath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// child is the path of property name inside loc.
func child(loc []string, name string) string {
	return argPath(append(loc[:len(loc):len(loc)], name))
}

func subject(loc []string) string {
	if len(loc) == 0 {
		return "the arguments"
	}
	return "argument " + quote(argPath(loc))
}

func quote(path string) string { return strconv.Quote(path) }
