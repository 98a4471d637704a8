// Package errs defines the one error type of dsh and of its plugins.
//
// It lives in the SDK module so that a plugin binary and the host share one
// type without the plugin importing dsh's runtime; dsh's own errs package
// re-exports it unchanged.
//
// Every failure that a caller may want to react to carries a stable string
// Code (AGENT_ADMISSION_REJECTED) and, where one code covers several causes, a
// Reason (agent-controller/agent-gone). Callers recognize errors by those two
// strings, never by Go type, so the check keeps holding after an error crossed
// a process boundary: a plugin binary, an HTTP response, a JSON log line.
package errs

import (
	"encoding/json"
	"errors"
	"strings"
)

// Code is a stable, machine-readable error class. Codes are SCREAMING_SNAKE
// strings and never change once published.
type Code string

// Codes used across the harness. Packages define their own domain codes next
// to the code that returns them.
const (
	// InvalidArgument: the caller passed a value the API cannot accept
	// (nil plugin, empty event name, nil listener, nil service).
	InvalidArgument Code = "INVALID_ARGUMENT"
	// ContextInactive: something was registered or read through a context
	// whose fiber is no longer active (disposed, unloaded or failed).
	ContextInactive Code = "CONTEXT_INACTIVE"
	// ServiceNotInjected: a plugin read a service key it did not declare.
	ServiceNotInjected Code = "SERVICE_NOT_INJECTED"
	// ServiceUnavailable: the service key has no active provider.
	ServiceUnavailable Code = "SERVICE_UNAVAILABLE"
	// ServiceConflict: a second provider tried to mount an occupied key.
	ServiceConflict Code = "SERVICE_CONFLICT"
	// PluginFailed: a plugin's Apply returned an error or panicked.
	PluginFailed Code = "PLUGIN_FAILED"
	// ListenerFailed: an event listener returned an error or panicked.
	ListenerFailed Code = "LISTENER_FAILED"
	// NextMisuse: a waterfall listener called next twice, or after its
	// dispatch had finished.
	NextMisuse Code = "NEXT_MISUSE"
	// Internal: a bug in dsh itself; the message says where.
	Internal Code = "INTERNAL"
)

// Error is the harness error. The zero value is not useful; build one with New
// or Wrap.
type Error struct {
	// Code is the stable class of the error.
	Code Code `json:"code"`
	// Reason narrows the code down, namespaced by its owner
	// ("agent-controller/agent-gone"). It may be empty.
	Reason string `json:"reason,omitempty"`
	// Message is for people: what happened, where, and how to fix it.
	Message string `json:"message"`
	// Cause is the underlying error, if any.
	Cause error `json:"-"`
	// Details carries extra machine-readable facts that belong to the code,
	// such as whether a refusal was already presented to the user.
	Details map[string]any `json:"details,omitempty"`
}

// New returns an error with the given code and message.
func New(code Code, message string) *Error {
	return &Error{Code: code, Message: message}
}

// Wrap returns an error with the given code and message whose cause is err.
func Wrap(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Cause: err}
}

// WithReason returns e with its reason set; it is meant for construction
// chains such as errs.New(code, msg).WithReason("x/y").
func (e *Error) WithReason(reason string) *Error {
	e.Reason = reason
	return e
}

// Error renders "CODE (reason): message: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Code))
	if e.Reason != "" {
		b.WriteString(" (")
		b.WriteString(e.Reason)
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap returns the cause, so errors.Is and errors.As see through an Error.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error with the same code and, when the
// target names a reason, the same reason. It lets errors.Is match a template
// such as errs.New(errs.ContextInactive, "") regardless of the message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t.Code != e.Code {
		return false
	}
	return t.Reason == "" || t.Reason == e.Reason
}

// CodeOf returns the code of the outermost *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// ReasonOf returns the reason of the outermost *Error in err's chain.
func ReasonOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason
	}
	return ""
}

// HasCode reports whether any *Error in err's chain carries code.
func HasCode(err error, code Code) bool {
	return errors.Is(err, &Error{Code: code})
}

// Has reports whether any *Error in err's chain carries code and reason.
func Has(err error, code Code, reason string) bool {
	return errors.Is(err, &Error{Code: code, Reason: reason})
}

// wire is the JSON shape of an Error. The cause is nested as another wire
// value when it is an *Error and reduced to its message otherwise, so a chain
// keeps its codes across a process boundary.
type wire struct {
	Code    Code           `json:"code"`
	Reason  string         `json:"reason,omitempty"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	Cause   *wire          `json:"cause,omitempty"`
}

func toWire(err error) *wire {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		return &wire{Code: e.Code, Reason: e.Reason, Message: e.Message, Details: e.Details, Cause: toWire(e.Cause)}
	}
	// A foreign error may wrap an *Error deeper down; keep that code visible.
	if inner, ok := errors.AsType[*Error](err); ok {
		return &wire{Message: err.Error(), Cause: toWire(inner)}
	}
	return &wire{Message: err.Error()}
}

func (w *wire) toError() error {
	if w == nil {
		return nil
	}
	if w.Code == "" {
		if w.Cause != nil {
			return &foreign{msg: w.Message, cause: w.Cause.toError()}
		}
		return &foreign{msg: w.Message}
	}
	return &Error{Code: w.Code, Reason: w.Reason, Message: w.Message, Details: w.Details, Cause: w.Cause.toError()}
}

// foreign stands in for a non-harness error that crossed a boundary: only its
// text survives.
type foreign struct {
	msg   string
	cause error
}

func (f *foreign) Error() string { return f.msg }
func (f *foreign) Unwrap() error { return f.cause }

// MarshalJSON encodes the error with its cause chain.
func (e *Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(toWire(e))
}

// UnmarshalJSON decodes an error written by MarshalJSON.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Error{Code: w.Code, Reason: w.Reason, Message: w.Message, Details: w.Details, Cause: w.Cause.toError()}
	return nil
}

// Encode turns any error into JSON that Decode reads back with its codes.
func Encode(err error) ([]byte, error) {
	return json.Marshal(toWire(err))
}

// Decode reads an error written by Encode or MarshalJSON.
func Decode(b []byte) (error, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	return w.toError(), nil
}
