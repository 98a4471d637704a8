package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Delivery is what a webhook's prompt template sees.
type Delivery struct {
	// Name is the webhook's name.
	Name string
	// Body is the body decoded as JSON (numbers as json.Number, so large
	// ids keep their digits), nil when it is not JSON.
	Body any
	// Raw is the body as text.
	Raw string
	// Header holds the request's headers, {{.Header.Get "X-GitHub-Event"}},
	// without the signature and credentials (Authorization, Cookie).
	Header http.Header
}

// render runs the webhook's template over the delivery. Nothing has been
// delivered yet, so a failure leaves nothing half done.
func (hk *hook) render(raw []byte, header http.Header) (string, error) {
	d := Delivery{Name: hk.name, Raw: string(raw), Header: header.Clone()}
	// What authenticates the request stays out of the prompt, and so
	// out of the session log.
	for _, k := range []string{hk.header, "Authorization", "Proxy-Authorization", "Cookie"} {
		d.Header.Del(k)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var body any
	if dec.Decode(&body) == nil && !dec.More() {
		d.Body = body
	}
	var out strings.Builder
	if err := hk.prompt.Execute(&out, d); err != nil {
		return "", errs.Wrap(TemplateFailed, err, fmt.Sprintf(
			"webhook %q: its prompt template failed on this delivery; fix serve.webhooks.%s.prompt: a missing key renders empty, but a field of a missing object (or of a body that is not a JSON object) fails, so guard optional parts with {{with}} or {{if}}", hk.name, hk.name))
	}
	if strings.TrimSpace(out.String()) == "" {
		return "", errs.New(TemplateFailed, fmt.Sprintf(
			"webhook %q: its prompt template rendered nothing for this delivery; change serve.webhooks.%s.prompt so every delivery yields some text", hk.name, hk.name))
	}
	return out.String(), nil
}
