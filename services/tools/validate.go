package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer words the validator's messages for the keywords collect does not
// word itself.
var printer = message.NewPrinter(language.English)

// maxProblems bounds the problems one result lists: the first few are
// enough to fix a call, and a wildly wrong call must not flood the context.
const maxProblems = 5

// compileSchema compiles a tool's parameters once, at registration. A
// schema may not load anything from outside itself: a $ref to a file or a
// URL is a registration error, not a read at call time.
func compileSchema(tool string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf(
			"tools.Register: the parameters schema of %q is not valid JSON", tool))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "urn:dsh:tool:" + tool
	if err := c.AddResource(url, doc); err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("tools.Register: the parameters schema of %q", tool))
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf(
			"tools.Register: the parameters schema of %q is not a valid JSON schema (draft 2020-12, self-contained); fix the schema the tool declares", tool))
	}
	return s, nil
}

// emptyObject stands for arguments a model left out: a call without
// arguments means "no arguments", {}. Each call gets its own copy, so a
// tool that writes into its arguments cannot change another call's.
func emptyObject() json.RawMessage { return json.RawMessage(`{}`) }

// validate checks call's arguments against schema. ok is false when they do
// not fit; the result then tells the model what to fix.
func validate(schema *jsonschema.Schema, call Call) (r Result, ok bool) {
	if schema == nil {
		if json.Valid(call.Arguments) {
			return Result{}, true
		}
		return notJSON(call, nil), false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(call.Arguments))
	if err != nil {
		return notJSON(call, err), false
	}
	err = schema.Validate(v)
	if err == nil {
		return Result{}, true
	}
	ve, isVE := err.(*jsonschema.ValidationError)
	if !isVE {
		return Result{Content: fmt.Sprintf("Invalid arguments for tool %q: %v. The call did not run.", call.Name, err), IsError: true}, false
	}
	var problems []string
	collect(ve, &problems)
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

// collect walks the validator's tree down to the leaves, the keywords that
// actually failed, and words each one by the argument it is about.
func collect(e *jsonschema.ValidationError, out *[]string) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	at := argPath(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, fmt.Sprintf("%s is required but missing", quote(child(e.InstanceLocation, m))))
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, fmt.Sprintf("%s is not a parameter of this tool; remove it", quote(child(e.InstanceLocation, p))))
		}
	case *kind.Type:
		*out = append(*out, fmt.Sprintf("%s must be %s, not %s", subject(at), strings.Join(k.Want, " or "), k.Got))
	case *kind.Minimum:
		*out = append(*out, fmt.Sprintf("%s must be at least %s, not %s", subject(at), k.Want.RatString(), k.Got.RatString()))
	case *kind.Maximum:
		*out = append(*out, fmt.Sprintf("%s must be at most %s, not %s", subject(at), k.Want.RatString(), k.Got.RatString()))
	case *kind.ExclusiveMinimum:
		*out = append(*out, fmt.Sprintf("%s must be more than %s, not %s", subject(at), k.Want.RatString(), k.Got.RatString()))
	case *kind.ExclusiveMaximum:
		*out = append(*out, fmt.Sprintf("%s must be less than %s, not %s", subject(at), k.Want.RatString(), k.Got.RatString()))
	case *kind.MinLength:
		*out = append(*out, fmt.Sprintf("%s must have at least %d characters, not %d", subject(at), k.Want, k.Got))
	case *kind.MaxLength:
		*out = append(*out, fmt.Sprintf("%s must have at most %d characters, not %d", subject(at), k.Want, k.Got))
	case *kind.MinItems:
		*out = append(*out, fmt.Sprintf("%s must have at least %d items, not %d", subject(at), k.Want, k.Got))
	case *kind.MaxItems:
		*out = append(*out, fmt.Sprintf("%s must have at most %d items, not %d", subject(at), k.Want, k.Got))
	default:
		*out = append(*out, fmt.Sprintf("%s: %s", subject(at), e.ErrorKind.LocalizedString(printer)))
	}
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

func subject(path string) string {
	if path == "" {
		return "the arguments"
	}
	return "argument " + quote(path)
}

func quote(path string) string { return strconv.Quote(path) }
