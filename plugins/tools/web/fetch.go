package web

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/egress"
	"golang.org/x/net/html/charset"
)

// Codes of web_fetch's refusals, in the Go errors Fetch returns.
const (
	// BadURL: the URL is not an http or https URL web_fetch fetches.
	BadURL errs.Code = "WEB_BAD_URL"
	// Binary: the answer is not text (an image, a PDF, an archive).
	Binary errs.Code = "WEB_BINARY"
	// TooManyRedirects: the redirects went on past max_redirects.
	TooManyRedirects errs.Code = "WEB_TOO_MANY_REDIRECTS"
	// Timeout: the fetch did not finish within the timeout.
	Timeout errs.Code = "WEB_TIMEOUT"
	// HTTPStatus: the server answered with an error status.
	HTTPStatus errs.Code = "WEB_HTTP_STATUS"
	// Failed: the connection failed or broke off.
	Failed errs.Code = "WEB_FETCH_FAILED"
)

// Page is a fetched answer, turned into text.
type Page struct {
	// URL is the final URL, after redirects.
	URL string
	// Redirects is how many redirects were followed.
	Redirects int
	// Status is the final answer's status code.
	Status int
	// ContentType is the answer's media type.
	ContentType string
	// Title is the HTML page's title, if any.
	Title string
	// Text is Markdown for HTML, the body as is for other text.
	Text string
	// Truncated: the body was longer than max_body_bytes, and only that
	// much was read.
	Truncated bool
	// Bytes is how many body bytes were read.
	Bytes int64
}

// resolver and dialAddr are how the fetcher looks names up and connects;
// tests map their own names to loopback and watch every connection.
var (
	resolver egress.Resolver = net.DefaultResolver
	dialAddr                 = func(ctx stdctx.Context, d *net.Dialer, addr netip.AddrPort) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr.String())
	}
)

// fetcher is web_fetch for one plugin instance: its policy and a transport
// whose every connection is judged by the policy on the addresses it
// dials.
type fetcher struct {
	cfg    Config
	policy egress.Policy
	tr     *http.Transport
	conv   *mdConverter
	// onRefusal logs a fetch the policy refused.
	onRefusal func(agent, url string, e *errs.Error)
}

func newFetcher(cfg Config, p egress.Policy) *fetcher {
	f := &fetcher{cfg: cfg, policy: p, conv: newConverter()}
	f.tr = &http.Transport{
		// Never a proxy from the environment: the proxy would resolve
		// the name, and the address check below would judge the proxy.
		Proxy:       nil,
		DialContext: f.dial,
		// A custom DialContext turns HTTP/2 off unless asked for.
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return f
}

// close drops the kept-alive connections, so a disposed plugin leaves no
// goroutine behind.
func (f *fetcher) close() { f.tr.CloseIdleConnections() }

// dial is the only way out: the policy judges the name and every address
// it resolves to, and only those addresses are dialled, never the name
// again, so a name cannot resolve to an allowed address for the check and
// a local one for the connection (DNS rebinding). Each redirect hop and
// each new connection comes through here.
func (f *fetcher) dial(ctx stdctx.Context, network, hostport string) (net.Conn, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, errs.New(BadURL, fmt.Sprintf("%q is not host:port", hostport))
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return nil, errs.New(BadURL, fmt.Sprintf("%q has no valid port", hostport))
	}
	addrs, err := f.policy.Decide(ctx, resolver, host, uint16(port))
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	var errList []error
	for _, a := range addrs {
		c, err := dialAddr(ctx, &d, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return c, nil
		}
		errList = append(errList, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errs.Wrap(egress.Unreachable, errors.Join(errList...), fmt.Sprintf("could not connect to %s", hostport)).WithReason("egress/dial")
}

// checkURL parses what the model gave and refuses what web_fetch does not
// fetch, saying how to write it.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, errs.New(BadURL, fmt.Sprintf("%q is not a URL: %v", clip(raw, 200), err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errs.New(BadURL, fmt.Sprintf("%q is not an http or https URL; web_fetch fetches only those (write https://host/path)", clip(raw, 200)))
	case u.Host == "" || u.Hostname() == "":
		return nil, errs.New(BadURL, fmt.Sprintf("%q has no host; write https://host/path", clip(raw, 200)))
	case u.User != nil:
		return nil, errs.New(BadURL, fmt.Sprintf("%q carries a user name or password; web_fetch sends no credentials, write the URL without user@", redact(u)))
	}
	u.Fragment = ""
	return u, nil
}

// redact shows a URL without its user info.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// Fetch GETs raw and turns the answer into text. Its errors are
// *errs.Error with the codes above or egress's (EGRESS_REFUSED for a
// refused host or address, EGRESS_UNREACHABLE), worded for the model.
func (f *fetcher) Fetch(ctx stdctx.Context, raw string) (Page, error) {
	u, err := checkURL(raw)
	if err != nil {
		return Page{}, err
	}
	ctx, cancel := stdctx.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	hops := 0
	client := &http.Client{
		Transport: f.tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return errs.New(BadURL, fmt.Sprintf("%s redirected to %q, which is not an http or https URL; it was not followed", via[len(via)-1].URL, clip(req.URL.String(), 200)))
			}
			if len(via) > f.cfg.MaxRedirects {
				return errs.New(TooManyRedirects, fmt.Sprintf("%s redirected more than %d times (the last to %s); it was not followed further (tools.web max_redirects)", u, f.cfg.MaxRedirects, clip(req.URL.String(), 200)))
			}
			hops = len(via)
			// No credentials in a redirect either.
			req.URL.User = nil
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Page{}, errs.New(BadURL, fmt.Sprintf("%q: %v", clip(raw, 200), err))
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return Page{}, f.requestError(ctx, u, hops, err)
	}
	defer resp.Body.Close()
	p := Page{URL: resp.Request.URL.String(), Redirects: hops, Status: resp.StatusCode}
	mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	p.ContentType = mt
	if kind := binaryKind(mt); kind != "" {
		return p, errs.New(Binary, fmt.Sprintf("%s is %s (%s), which web_fetch does not read: it returns text only (HTML as Markdown, plain text, JSON, XML)", p.URL, kind, mt))
	}
	body, truncated, err := readCapped(resp.Body, f.cfg.MaxBodyBytes)
	p.Bytes, p.Truncated = int64(len(body)), truncated
	if truncated {
		// The cut may split a character; the text up to it still reads.
		body = trimPartialRune(body)
	}
	if err != nil {
		return p, f.bodyError(ctx, p, err)
	}
	if mt == "" {
		mt, params, _ = mime.ParseMediaType(http.DetectContentType(body))
		p.ContentType = mt
		if kind := binaryKind(mt); kind != "" {
			return p, errs.New(Binary, fmt.Sprintf("%s sent no content type and its body looks like %s (%s), which web_fetch does not read", p.URL, kind, mt))
		}
	}
	text, err := decodeText(body, params["charset"], mt)
	if err != nil {
		return p, errs.New(Binary, fmt.Sprintf("%s says it is %s but its body is not text (%v); web_fetch does not read binary content", p.URL, mt, err))
	}
	if isHTML(mt) {
		p.Title, p.Text, err = f.conv.convert(ctx, text, p.URL)
		if err != nil {
			return p, errs.Wrap(Failed, err, fmt.Sprintf("%s could not be turned into Markdown", p.URL))
		}
	} else {
		p.Text = text
	}
	if resp.StatusCode >= 400 {
		return p, errs.New(HTTPStatus, fmt.Sprintf("%s answered %s", p.URL, resp.Status))
	}
	return p, nil
}

// requestError words a failed request: the policy's refusal (of the first
// URL or a redirect hop), a timeout, a redirect refused, or a broken
// connection.
func (f *fetcher) requestError(ctx stdctx.Context, u *url.URL, hops int, err error) error {
	target := u.String()
	var ue *url.Error
	if errors.As(err, &ue) {
		target = ue.URL
		err = ue.Err
	}
	var e *errs.Error
	if errors.As(err, &e) {
		switch {
		case e.Code == BadURL || e.Code == TooManyRedirects:
			return e
		case hops > 0 || target != u.String():
			e2 := errs.New(e.Code, fmt.Sprintf("%s redirected to %s, which was not fetched: %s", u, target, e.Message)).WithReason(e.Reason)
			e2.Details = e.Details
			return e2
		default:
			e2 := errs.New(e.Code, fmt.Sprintf("%s was not fetched: %s", target, e.Message)).WithReason(e.Reason)
			e2.Details = e.Details
			return e2
		}
	}
	if errors.Is(ctx.Err(), stdctx.DeadlineExceeded) {
		return errs.New(Timeout, fmt.Sprintf("%s did not answer within %s (tools.web timeout)", target, f.cfg.Timeout))
	}
	return errs.Wrap(Failed, err, fmt.Sprintf("fetching %s failed: %v", target, err))
}

// bodyError words a body that broke off or came too slowly.
func (f *fetcher) bodyError(ctx stdctx.Context, p Page, err error) error {
	if errors.Is(ctx.Err(), stdctx.DeadlineExceeded) {
		return errs.New(Timeout, fmt.Sprintf("%s did not finish sending within %s (tools.web timeout); %d bytes had arrived", p.URL, f.cfg.Timeout, p.Bytes))
	}
	return errs.Wrap(Failed, err, fmt.Sprintf("the answer of %s broke off after %d bytes: %v", p.URL, p.Bytes, err))
}

// readCapped reads at most limit bytes of r; truncated says there was
// more, which is left unread (the connection is then dropped, not
// drained).
func readCapped(r io.Reader, limit int64) ([]byte, bool, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return buf.Bytes(), false, err
	}
	if n > limit {
		return buf.Bytes()[:limit], true, nil
	}
	return buf.Bytes(), false, nil
}

// binaryKind names the kind of a media type web_fetch refuses, or ""
// for text it reads. Unknown types are judged by their body.
func binaryKind(mt string) string {
	major, minor, _ := strings.Cut(mt, "/")
	switch major {
	case "image":
		return "an image"
	case "audio":
		return "an audio file"
	case "video":
		return "a video"
	case "font":
		return "a font"
	case "model":
		return "a 3D model"
	case "text":
		return ""
	case "application":
		switch {
		case minor == "json" || minor == "xml" || minor == "javascript" || minor == "ecmascript" || minor == "x-javascript",
			strings.HasSuffix(minor, "+json"), strings.HasSuffix(minor, "+xml"), minor == "x-ndjson", minor == "yaml", minor == "x-yaml", minor == "toml", minor == "x-sh", minor == "graphql", minor == "sql":
			return ""
		case minor == "pdf":
			return "a PDF document"
		case minor == "zip" || minor == "gzip" || minor == "x-gzip" || minor == "x-tar" || minor == "x-7z-compressed" || minor == "x-rar-compressed" || minor == "zstd" || minor == "x-bzip2" || minor == "x-xz":
			return "an archive"
		case minor == "octet-stream":
			return "binary data"
		case minor == "wasm" || strings.HasPrefix(minor, "x-executable") || minor == "x-msdownload" || minor == "x-mach-binary" || minor == "x-elf":
			return "a program"
		case strings.HasPrefix(minor, "vnd."), strings.HasPrefix(minor, "msword"):
			return "an office or vendor document"
		}
		return "binary data"
	case "multipart":
		return "a multipart body"
	}
	return ""
}

func isHTML(mt string) bool { return mt == "text/html" || mt == "application/xhtml+xml" }

// decodeText turns body into UTF-8 text by its charset (given, or sniffed
// for HTML); a NUL byte or bytes that are not text in any charset refuse
// it.
func decodeText(body []byte, cs, mt string) (string, error) {
	if bytes.IndexByte(body, 0) >= 0 {
		return "", fmt.Errorf("it holds NUL bytes")
	}
	// Most of the web is UTF-8: checked in place, not run through a
	// decoder (which doubled the CPU of a plain-text fetch).
	if (cs == "" || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8")) && utf8.Valid(body) {
		return string(body), nil
	}
	ct := mt
	if cs != "" {
		ct += "; charset=" + cs
	}
	r, err := charset.NewReader(bytes.NewReader(body), ct)
	if err != nil {
		return "", fmt.Errorf("unknown charset %q", cs)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(out) {
		return "", fmt.Errorf("it is not valid %s", strings.ToUpper(orDefault(cs, "UTF-8")))
	}
	return string(out), nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if r, _ := utf8.DecodeRune(b[len(b)-i:]); r == utf8.RuneError && !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
