package sdk

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// PluginError is the code of an error a plugin returned without one.
const PluginError errs.Code = "PLUGIN_ERROR"

// ErrorToProto turns an error into its wire form, keeping code and reason.
func ErrorToProto(err error) *pluginv1.Error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		return &pluginv1.Error{Code: string(PluginError), Message: err.Error()}
	}
	out := &pluginv1.Error{Code: string(e.Code), Reason: e.Reason, Message: e.Message}
	if e.Cause != nil {
		out.Message += ": " + e.Cause.Error()
	}
	// Keep what wrapped it, as in fmt.Errorf("checking %s: %w", …).
	if outer, inner := err.Error(), e.Error(); outer != inner && strings.HasSuffix(outer, inner) {
		out.Message = strings.TrimSuffix(outer, inner) + out.Message
	}
	if len(e.Details) > 0 {
		out.DetailsJson, _ = json.Marshal(e.Details)
	}
	return out
}

// ErrorFromProto turns a wire error back into an *errs.Error, so callers
// match it by code and reason as if it had never left the process.
func ErrorFromProto(e *pluginv1.Error) error {
	if e == nil {
		return nil
	}
	code := errs.Code(e.Code)
	if code == "" {
		code = PluginError
	}
	out := errs.New(code, e.Message).WithReason(e.Reason)
	if len(e.DetailsJson) > 0 {
		_ = json.Unmarshal(e.DetailsJson, &out.Details)
	}
	return out
}
