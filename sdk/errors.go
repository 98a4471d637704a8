package sdk

import (
	"encoding/json"
	"errors"

	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// PluginError is the code of an error a plugin returned without one.
const PluginError errs.Code = "PLUGIN_ERROR"

// ErrorToProto turns an error into its wire form: each *errs.Error of the
// chain keeps its code, reason, message and details, and a wrapper without a
// code (fmt.Errorf("checking %s: %w", …)) keeps its text, so the far side
// matches any code of the chain and prints the same words.
func ErrorToProto(err error) *pluginv1.Error {
	if err == nil {
		return nil
	}
	out := errorToProto(err)
	if out.Code == "" && out.Cause == nil {
		out.Code = string(PluginError)
	}
	return out
}

func errorToProto(err error) *pluginv1.Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*errs.Error); ok {
		out := &pluginv1.Error{Code: string(e.Code), Reason: e.Reason, Message: e.Message, Cause: errorToProto(e.Cause)}
		if len(e.Details) > 0 {
			out.DetailsJson, _ = json.Marshal(e.Details)
		}
		return out
	}
	// A foreign error travels as its text; when it wraps an *errs.Error
	// deeper down, that one follows as the cause so its code stays visible.
	out := &pluginv1.Error{Message: err.Error()}
	if inner, ok := errors.AsType[*errs.Error](err); ok {
		out.Cause = errorToProto(inner)
	}
	return out
}

// ErrorFromProto turns a wire error back into the chain it came from, so
// callers match it by code and reason (errs.HasCode, errs.Has) as if it had
// never left the process.
func ErrorFromProto(e *pluginv1.Error) error {
	if e != nil && e.Code == "" && e.Cause == nil {
		// A plugin in another language may send a bare message.
		return &errs.Error{Code: PluginError, Reason: e.Reason, Message: e.Message}
	}
	return errorFromProto(e)
}

func errorFromProto(e *pluginv1.Error) error {
	if e == nil {
		return nil
	}
	if e.Code == "" {
		return &foreign{msg: e.Message, cause: errorFromProto(e.Cause)}
	}
	out := &errs.Error{Code: errs.Code(e.Code), Reason: e.Reason, Message: e.Message, Cause: errorFromProto(e.Cause)}
	if len(e.DetailsJson) > 0 {
		_ = json.Unmarshal(e.DetailsJson, &out.Details)
	}
	return out
}

// foreign stands for an error without a code that crossed the boundary: its
// text, and the chain it wrapped.
type foreign struct {
	msg   string
	cause error
}

func (f *foreign) Error() string { return f.msg }
func (f *foreign) Unwrap() error { return f.cause }
