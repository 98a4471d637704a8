// Package errs is the one error type of the dsh harness.
//
// Every failure that a caller may want to react to carries a stable string
// Code (AGENT_ADMISSION_REJECTED) and, where one code covers several causes, a
// Reason (agent-controller/agent-gone). Callers recognize errors by those two
// strings, never by Go type, so the check keeps holding after an error crossed
// a process boundary: a plugin binary, an HTTP response, a JSON log line.
//
// The type itself is defined in the plugin SDK's module
// (github.com/dsh-go/dsh/sdk/errs), which plugin binaries import without
// the rest of dsh; the names here are aliases of it, so an error a plugin
// builds and one dsh builds are the same Go type and match alike.
package errs

import sdkerrs "github.com/dsh-go/dsh/sdk/errs"

// Code is a stable, machine-readable error class. Codes are SCREAMING_SNAKE
// strings and never change once published.
type Code = sdkerrs.Code

// Error is the harness error. Build one with New or Wrap.
type Error = sdkerrs.Error

// Codes used across the harness; see sdk/errs for what each means.
// Packages define their own domain codes next to the code that returns them.
const (
	InvalidArgument    = sdkerrs.InvalidArgument
	ContextInactive    = sdkerrs.ContextInactive
	ServiceNotInjected = sdkerrs.ServiceNotInjected
	ServiceUnavailable = sdkerrs.ServiceUnavailable
	ServiceConflict    = sdkerrs.ServiceConflict
	PluginFailed       = sdkerrs.PluginFailed
	ListenerFailed     = sdkerrs.ListenerFailed
	NextMisuse         = sdkerrs.NextMisuse
	Internal           = sdkerrs.Internal
)

// New returns an error with the given code and message.
func New(code Code, message string) *Error { return sdkerrs.New(code, message) }

// Wrap returns an error with the given code and message whose cause is err.
func Wrap(code Code, err error, message string) *Error { return sdkerrs.Wrap(code, err, message) }

// CodeOf returns the code of the outermost *Error in err's chain, or "".
func CodeOf(err error) Code { return sdkerrs.CodeOf(err) }

// ReasonOf returns the reason of the outermost *Error in err's chain.
func ReasonOf(err error) string { return sdkerrs.ReasonOf(err) }

// HasCode reports whether any *Error in err's chain carries code.
func HasCode(err error, code Code) bool { return sdkerrs.HasCode(err, code) }

// Has reports whether any *Error in err's chain carries code and reason.
func Has(err error, code Code, reason string) bool { return sdkerrs.Has(err, code, reason) }

// Encode turns any error into JSON that Decode reads back with its codes.
func Encode(err error) ([]byte, error) { return sdkerrs.Encode(err) }

// Decode reads an error written by Encode or MarshalJSON.
func Decode(b []byte) (error, error) { return sdkerrs.Decode(b) }
