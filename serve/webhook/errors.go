package webhook

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/serve/unattended"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// Codes of the webhooks. They are stable strings; the ones shared with the
// rest of dsh serve (SERVE_*) have the same meaning there.
const (
	// NotFound: no webhook has the name in the URL.
	NotFound errs.Code = "WEBHOOK_NOT_FOUND"
	// BadSignature: the signature header is missing, malformed or does
	// not match the body (reason webhook/missing-signature or
	// webhook/bad-signature).
	BadSignature errs.Code = "WEBHOOK_BAD_SIGNATURE"
	// TemplateFailed: the webhook's prompt template failed on this
	// delivery, or rendered an empty prompt; nothing was delivered.
	TemplateFailed errs.Code = "WEBHOOK_TEMPLATE_FAILED"
	// MethodNotAllowed: only POST delivers.
	MethodNotAllowed errs.Code = "WEBHOOK_METHOD_NOT_ALLOWED"
	// BodyTooLarge: the body is larger than the webhook's limit.
	BodyTooLarge errs.Code = "SERVE_BODY_TOO_LARGE"
	// ShuttingDown: dsh serve is stopping and takes no delivery.
	ShuttingDown errs.Code = "SERVE_SHUTTING_DOWN"
)

// Reasons that go with BadSignature.
const (
	ReasonMissingSignature = "webhook/missing-signature"
	ReasonBadSignature     = "webhook/bad-signature"
)

// errorBody is the error shape every non-2xx answer of dsh serve has.
type errorBody struct {
	Code      errs.Code `json:"code"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message"`
	Presented *bool     `json:"presented,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
}

// writeError answers err with its status and the contract's JSON body.
func writeError(w http.ResponseWriter, err error, requestID string) {
	body := errorBody{Code: errs.CodeOf(err), Reason: errs.ReasonOf(err), Message: messageOf(err), RequestID: requestID}
	if body.Code == "" {
		body.Code = errs.Internal
	}
	if r, ok := sessions.RejectionOf(err); ok {
		body.Code, body.Reason, body.Message = sessions.PromptRejected, r.Reason, r.Message
		body.Presented = &r.Presented
	}
	writeJSON(w, statusOf(err), body)
}

// messageOf is the outermost message with its causes: what people read.
func messageOf(err error) string {
	if e, ok := errors.AsType[*errs.Error](err); ok && e.Cause == nil {
		return e.Message
	}
	return err.Error()
}

func statusOf(err error) int {
	switch {
	case errs.HasCode(err, sessions.PromptRejected), errs.HasCode(err, TemplateFailed):
		return http.StatusUnprocessableEntity
	case errs.HasCode(err, BadSignature):
		return http.StatusUnauthorized
	case errs.HasCode(err, NotFound):
		return http.StatusNotFound
	case errs.HasCode(err, MethodNotAllowed):
		return http.StatusMethodNotAllowed
	case errs.HasCode(err, BodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errs.HasCode(err, session.SessionLocked), errs.HasCode(err, sessions.Closed):
		return http.StatusConflict
	case errs.HasCode(err, ShuttingDown), errs.HasCode(err, unattended.Closed), errs.HasCode(err, sessions.Stopped):
		return http.StatusServiceUnavailable
	case errs.HasCode(err, errs.InvalidArgument):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
