package egress

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
)

// Refusal records one request the proxy did not let through.
type Refusal struct {
	// Agent is Options.Agent.
	Agent string
	// Method is the request's method (CONNECT for a tunnel).
	Method string
	// Target is host:port as the client asked for it.
	Target string
	// Reason is the refusal's reason (ReasonNotAllowed, ...).
	Reason string
	// Rule is the deny entry that decided, when one did.
	Rule string
	// Message is what the client was told.
	Message string
	// Time is when the proxy refused.
	Time time.Time
}

// refuse answers a policy refusal with 403 and records it. The reason
// phrase carries the message too: for a refused CONNECT most clients show
// only the status line (curl, Python and Go print it, not the body).
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, target string, err error) {
	e, _ := errors.AsType[*errs.Error](err)
	if e == nil || e.Code != Refused {
		p.fail(w, r, target, err)
		return
	}
	rule, _ := e.Details["rule"].(string)
	rec := Refusal{Agent: p.opts.Agent, Method: r.Method, Target: target, Reason: e.Reason, Rule: rule, Message: e.Message, Time: time.Now()}
	attrs := []any{"target", target, "method", r.Method, "reason", e.Reason}
	if p.opts.Agent != "" {
		attrs = append(attrs, "agent", p.opts.Agent)
	}
	if rule != "" {
		attrs = append(attrs, "rule", rule)
	}
	p.opts.Logger.Warn("egress refused: "+e.Message, attrs...)
	if p.opts.OnRefusal != nil {
		p.opts.OnRefusal(rec)
	}
	status := "destination_ip_prohibited"
	if e.Reason == ReasonNotAllowed || e.Reason == ReasonDeniedName || e.Reason == ReasonOff {
		status = "http_request_denied"
	}
	p.respond(w, r, http.StatusForbidden, status, e.Reason, e.Message)
}

// fail answers a target the proxy could not judge (400) or reach (502).
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, target string, err error) {
	code, status, reason := http.StatusBadGateway, "destination_unavailable", errs.ReasonOf(err)
	msg := err.Error()
	if e, ok := errors.AsType[*errs.Error](err); ok {
		msg = e.Message
		if e.Cause != nil {
			msg += ": " + e.Cause.Error()
		}
		switch e.Code {
		case BadTarget:
			code, status = http.StatusBadRequest, "http_request_error"
		case Unreachable:
			if e.Reason == "egress/resolve" {
				status = "dns_error"
			}
		}
	}
	p.opts.Logger.Debug("egress failed: "+msg, "target", target, "agent", p.opts.Agent)
	p.respond(w, r, code, status, reason, msg)
}

func (p *Proxy) badRequest(w http.ResponseWriter, msg string) {
	w.Header().Set("Proxy-Status", "dsh; error=http_request_error")
	w.Header().Set("Connection", "close")
	http.Error(w, msg, http.StatusBadRequest)
}

// respond writes a final answer on the raw connection so the status line
// can carry the message, then closes it. Where the connection cannot be
// taken over it falls back to an ordinary response.
func (p *Proxy) respond(w http.ResponseWriter, r *http.Request, code int, proxyStatus, reason, msg string) {
	phrase := http.StatusText(code) + " (" + oneLine(msg) + ")"
	details := strconv.Quote(oneLine(msg))
	body := msg + "\n"
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Proxy-Status", "dsh; error="+proxyStatus+"; details="+details)
		w.Header().Set("X-Dsh-Egress-Reason", reason)
		w.Header().Set("Connection", "close")
		http.Error(w, msg, code)
		return
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", code, phrase)
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	fmt.Fprintf(&b, "Proxy-Status: dsh; error=%s; details=%s\r\n", proxyStatus, details)
	if reason != "" {
		fmt.Fprintf(&b, "X-Dsh-Egress-Reason: %s\r\n", reason)
	}
	b.WriteString("Connection: close\r\n")
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	if r.Method != http.MethodHead {
		b.WriteString(body)
	}
	conn.SetWriteDeadline(time.Now().Add(p.opts.HeaderTimeout))
	brw.WriteString(b.String())
	if brw.Flush() == nil {
		linger(conn)
	}
}

// Bounds of linger: a refused upload is drained for this long, this far.
const (
	lingerTime  = 2 * time.Second
	lingerBytes = 16 << 20
)

// linger half-closes conn and reads what the client still sends (the
// body of a refused upload) until it closes its side. Closing with unread
// bytes would send a reset, and a reset can reach the client before it
// has read the answer, which it then never sees.
func linger(conn net.Conn) {
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	conn.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, conn, lingerBytes)
}

// oneLine makes msg safe for a status line or a quoted header value:
// printable ASCII only, bounded length.
func oneLine(msg string) string {
	var b strings.Builder
	for _, c := range []byte(msg) {
		if c < 0x20 || c >= 0x7f {
			c = ' '
		}
		b.WriteByte(c)
		if b.Len() >= 300 {
			b.WriteString("...")
			break
		}
	}
	return b.String()
}
