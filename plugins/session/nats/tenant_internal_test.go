package nats

import (
	"net/url"
	"strings"
	"testing"
)

// A tenant is written into a header value escaped: a CR or LF in it could
// otherwise end the header and start one of the caller's choosing.
func TestTheTenantHeaderIsEscaped(t *testing.T) {
	tenant := "acme\r\nDsh-Agent: evil\x00 100%"
	m := (&writer{subject: "dsh.s.x"}).message(outgoing{data: []byte("{}")}, author{agent: "main", tenant: tenant})
	raw := m.Header.Get(tenantHeader)
	if strings.ContainsAny(raw, "\r\n\x00") {
		t.Fatalf("the header value %q carries a control character", raw)
	}
	if got, err := url.QueryUnescape(raw); err != nil || got != tenant {
		t.Fatalf("the header reads back as %q (%v), want %q", got, err, tenant)
	}
	if len(m.Header) != 2 || m.Header.Get(agentHeader) != "main" {
		t.Fatalf("headers %v", m.Header)
	}
	if m := (&writer{subject: "dsh.s.x"}).message(outgoing{data: []byte("{}")}, author{agent: "main"}); m.Header.Get(tenantHeader) != "" || len(m.Header) != 1 {
		t.Fatalf("an operator's session's message has headers %v", m.Header)
	}
}
