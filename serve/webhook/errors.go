package webhook

import (
	"net/http"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/serve/apierr"
	"github.com/dsh-go/dsh/serve/unattended"
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
	BodyTooLarge = apierr.BodyTooLarge
	// ShuttingDown: dsh serve is stopping and takes no delivery.
	ShuttingDown = apierr.ShuttingDown
)

// Reasons that go with BadSignature.
const (
	ReasonMissingSignature = "webhook/missing-signature"
	ReasonBadSignature     = "webhook/bad-signature"
)

// statuses maps the webhooks' own codes; apierr maps the rest.
var statuses = map[errs.Code]int{
	TemplateFailed:   http.StatusUnprocessableEntity,
	BadSignature:     http.StatusUnauthorized,
	NotFound:         http.StatusNotFound,
	MethodNotAllowed: http.StatusMethodNotAllowed,
	SpoolFailed:      http.StatusServiceUnavailable,
	// The fixed session is another tenant's: the config or that session
	// must change, so a redelivery fares no better.
	unattended.ForeignSession: http.StatusConflict,
}

// writeError answers err with its status and the server's JSON error body.
func writeError(w http.ResponseWriter, err error, requestID string) {
	apierr.Write(w, err, statuses, requestID)
}

func writeJSON(w http.ResponseWriter, status int, v any) { apierr.WriteJSON(w, status, v) }
