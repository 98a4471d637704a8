package acp

import (
	"fmt"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// JSON-RPC error codes dsh answers with besides the protocol's own. The
// data of every error carries dsh's stable code and reason, so a client
// can match on them; the message says what to do.
const (
	// CodeNotFound: no such session (ACP's resource_not_found).
	CodeNotFound = -32002
	// CodeRefused: admission refused the prompt or steer.
	CodeRefused = -32010
	// CodeLocked: the session is open elsewhere (another process, or this
	// one).
	CodeLocked = -32011
	// CodeClosed: the session closed while the request ran.
	CodeClosed = -32012
	// CodeTurnFailed: the turn ended in an error (the provider failed).
	CodeTurnFailed = -32013
)

// Codes of the acp package.
const (
	// UnknownSession: a request named a session this connection does not
	// hold.
	UnknownSession errs.Code = "ACP_UNKNOWN_SESSION"
	// BadParams: a request's params are valid JSON-RPC but not something
	// dsh can act on (a relative cwd, an unknown mode).
	BadParams errs.Code = "ACP_BAD_PARAMS"
)

// data is the error data of a dsh error.
func data(err error) map[string]any {
	d := map[string]any{"code": string(errs.CodeOf(err)), "message": err.Error()}
	if r := errs.ReasonOf(err); r != "" {
		d["reason"] = r
	}
	return d
}

// rpcErr maps a dsh error onto a JSON-RPC error.
func rpcErr(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(*acp.RequestError); ok {
		return re
	}
	if r, ok := sessions.RejectionOf(err); ok {
		d := data(err)
		d["presented"] = r.Presented
		d["reason"] = r.Reason
		refusalData(d, r)
		return &acp.RequestError{Code: CodeRefused, Message: "prompt refused: " + r.Message, Data: d}
	}
	switch errs.CodeOf(err) {
	case UnknownSession, session.NotFound:
		return &acp.RequestError{Code: CodeNotFound, Message: err.Error(), Data: data(err)}
	case session.SessionLocked:
		return &acp.RequestError{Code: CodeLocked, Message: err.Error(), Data: data(err)}
	case sessions.Closed:
		return &acp.RequestError{Code: CodeClosed, Message: err.Error(), Data: data(err)}
	case session.NoPersistence:
		// Not advertised without a store (capabilities.go): to a client
		// that calls it anyway, the method is not there.
		return &acp.RequestError{Code: -32601, Message: "Method not found: " + err.Error(), Data: data(err)}
	case BadParams, errs.InvalidArgument, parts.Unsupported:
		return &acp.RequestError{Code: -32602, Message: "Invalid params: " + err.Error(), Data: data(err)}
	}
	return &acp.RequestError{Code: -32603, Message: "Internal error: " + err.Error(), Data: data(err)}
}

func unknownSession(id acp.SessionId) error {
	return errs.New(UnknownSession, fmt.Sprintf(
		"session %q is not open on this connection; open it with session/new, session/load or session/resume first (session/list shows the stored ones)", id))
}
