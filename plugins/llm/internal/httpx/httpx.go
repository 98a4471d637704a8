// Package httpx opens the streaming HTTP requests of the model providers:
// it retries 429 and 5xx answers that come before any byte of the stream,
// with exponential backoff and jitter and honouring Retry-After, bounds the
// wait for the response headers and every wait for more of the stream, and
// turns HTTP failures into errors that say what to do.
package httpx

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// Reasons of provider failures (code llm.ProviderFailed).
const (
	ReasonUnauthorized = "llm/unauthorized"
	ReasonRateLimited  = "llm/rate-limited"
	ReasonServerError  = "llm/server-error"
	ReasonBadRequest   = "llm/bad-request"
	ReasonNetwork      = "llm/network"
	ReasonTimeout      = "llm/timeout"
	// ReasonStalled: the stream started but no more of it arrived within
	// the idle timeout.
	ReasonStalled = "llm/stream-idle-timeout"
	// ReasonTruncated: the stream ended before its end marker.
	ReasonTruncated = "llm/stream-truncated"
	// ReasonBadChunk: an event could not be decoded.
	ReasonBadChunk = "llm/bad-chunk"
	// ReasonAPIError: the API reported an error inside the stream.
	ReasonAPIError = "llm/api-error"
)

// Client opens streams for one provider.
type Client struct {
	// Provider names the provider in errors ("deepseek").
	Provider string
	// KeyEnv is the environment variable the API key was read from, named
	// in the error for a rejected key; KeySent says whether it held one.
	KeyEnv  string
	KeySent bool
	HTTP    *http.Client
	// Retries is how many times a 429 or 5xx is retried.
	Retries int
	// Backoff is the first retry's delay bound; it doubles per attempt up
	// to MaxBackoff, and each delay is drawn at random below its bound.
	Backoff, MaxBackoff time.Duration
	// HeaderTimeout bounds the wait for the response headers of one try,
	// and the read of an error answer's body.
	HeaderTimeout time.Duration
	// IdleTimeout bounds each wait for more of a stream that has started.
	IdleTimeout time.Duration
	// Log gets a line per retry; nil logs nothing.
	Log hclog.Logger
}

func (c *Client) log() hclog.Logger {
	if c.Log == nil {
		return hclog.NewNullLogger()
	}
	return c.Log
}

// Open posts body to url and returns the response of the first try that
// answers 200. Closing the body releases everything.
func (c *Client) Open(ctx stdctx.Context, url string, header http.Header, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, retryAfter, err := c.try(ctx, url, header, body)
		if err == nil {
			return resp, nil
		}
		if retryAfter < 0 || attempt >= c.Retries || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil, stdctx.Cause(ctx)
			}
			return nil, err
		}
		wait := c.backoff(attempt)
		if retryAfter > 0 {
			wait = min(retryAfter, time.Minute)
		}
		// A retry can wait a minute on Retry-After: say so, or the user
		// sees a hang.
		c.log().Info("retrying the model request", "provider", c.Provider, "status", statusOf(err),
			"wait", wait, "retry_after", retryAfter > 0, "retry", fmt.Sprintf("%d/%d", attempt+1, c.Retries))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, stdctx.Cause(ctx)
		}
	}
}

func (c *Client) backoff(attempt int) time.Duration {
	base, ceiling := c.Backoff, c.MaxBackoff
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = 20 * time.Second
	}
	bound := min(base<<attempt, ceiling)
	return bound/2 + rand.N(bound/2+1)
}

// try makes one request. retryAfter is -1 when the failure is final, 0 to
// retry after the backoff, and positive to retry after that long.
func (c *Client) try(ctx stdctx.Context, url string, header http.Header, body []byte) (*http.Response, time.Duration, error) {
	tryCtx, cancel := stdctx.WithCancel(ctx)
	var timer *time.Timer
	var timedOut atomic.Bool
	if c.HeaderTimeout > 0 {
		timer = time.AfterFunc(c.HeaderTimeout, func() { timedOut.Store(true); cancel() })
	}
	req, err := http.NewRequestWithContext(tryCtx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, -1, errs.Wrap(llm.ProviderFailed, err, fmt.Sprintf("%s: cannot build a request to %s", c.Provider, url)).WithReason(ReasonBadRequest)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.HTTP.Do(req)
	if timer != nil {
		timer.Stop()
	}
	if err != nil {
		cancel()
		if timedOut.Load() {
			return nil, 0, errs.New(llm.ProviderFailed, fmt.Sprintf("%s: no response from %s within %s", c.Provider, url, c.HeaderTimeout)).WithReason(ReasonTimeout)
		}
		return nil, -1, errs.Wrap(llm.ProviderFailed, err, fmt.Sprintf("%s: request to %s failed", c.Provider, url)).WithReason(ReasonNetwork)
	}
	if resp.StatusCode == http.StatusOK {
		resp.Body = c.watch(ctx, resp.Body, cancel, url)
		return resp, 0, nil
	}
	defer cancel()
	defer resp.Body.Close()
	detail := c.errorDetail(resp.Body, cancel)
	code := resp.StatusCode
	status := fmt.Sprintf("HTTP %d", code)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return nil, -1, httpError(code, fmt.Sprintf("%s rejected the credentials (%s: %s); %s", c.Provider, status, detail, c.keyHint()), ReasonUnauthorized)
	case code == http.StatusTooManyRequests:
		return nil, retryAfter(resp.Header.Get("Retry-After")), httpError(code, fmt.Sprintf("%s is rate limiting (%s: %s)", c.Provider, status, detail), ReasonRateLimited)
	case code >= 500:
		return nil, retryAfter(resp.Header.Get("Retry-After")), httpError(code, fmt.Sprintf("%s had a server error (%s: %s)", c.Provider, status, detail), ReasonServerError)
	}
	return nil, -1, httpError(code, fmt.Sprintf("%s refused the request (%s: %s)", c.Provider, status, detail), ReasonBadRequest)
}

// retryAfter parses Retry-After as seconds or an HTTP date; 0 means absent.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return max(time.Duration(s)*time.Second, time.Millisecond)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), time.Millisecond)
	}
	return 0
}

// keyHint says which key was sent, so a rejected key is traced to its
// variable, and a missing one to the variable that was not set.
func (c *Client) keyHint() string {
	switch {
	case c.KeySent:
		return "the key sent was read from " + c.KeyEnv + "; set " + c.KeyEnv + " to a valid API key"
	case c.KeyEnv != "":
		return "no API key was sent because " + c.KeyEnv + " is not set; set it to your API key (or api_key_env: to the variable that holds it)"
	}
	return "no API key was sent (api_key_env: " + NoKey + "); set api_key_env: to the variable that holds the key"
}

// statusOf names the failure of a try in the retry log line: the HTTP
// status, or the missing answer.
func statusOf(err error) any {
	if e, ok := errors.AsType[*errs.Error](err); ok {
		if st, ok := e.Details["status"]; ok {
			return st
		}
	}
	return "no response"
}

// httpError is a failure answer of the server; its status is kept in the
// details, where callers and the retry log read it.
func httpError(code int, msg, reason string) *errs.Error {
	e := errs.New(llm.ProviderFailed, msg).WithReason(reason)
	e.Details = map[string]any{"status": code}
	return e
}

// errorDetail extracts the message of an error body. The body is read
// under the header timeout: a server that sends an error status and then
// stalls must not hold the request forever.
func (c *Client) errorDetail(r io.Reader, cancel stdctx.CancelFunc) string {
	if c.HeaderTimeout > 0 {
		t := time.AfterFunc(c.HeaderTimeout, cancel)
		defer t.Stop()
	}
	b, _ := io.ReadAll(io.LimitReader(r, 8<<10))
	var shaped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &shaped) == nil && len(shaped.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(shaped.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(shaped.Error, &s) == nil && s != "" {
			return s
		}
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return "no details"
	}
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}
