// Package httpx opens the streaming HTTP requests of the model providers:
// it retries 429 and 5xx answers that come before any byte of the stream,
// with exponential backoff and jitter and honouring Retry-After, bounds the
// wait for the response headers, and turns HTTP failures into errors that
// say what to do.
package httpx

import (
	"bytes"
	stdctx "context"
	"encoding/json"
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
)

// Reasons of provider failures (code llm.ProviderFailed).
const (
	ReasonUnauthorized = "llm/unauthorized"
	ReasonRateLimited  = "llm/rate-limited"
	ReasonServerError  = "llm/server-error"
	ReasonBadRequest   = "llm/bad-request"
	ReasonNetwork      = "llm/network"
	ReasonTimeout      = "llm/timeout"
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
	// KeyEnv is the environment variable holding the API key, named in
	// the error for a rejected key.
	KeyEnv string
	HTTP   *http.Client
	// Retries is how many times a 429 or 5xx is retried.
	Retries int
	// Backoff is the first retry's delay bound; it doubles per attempt up
	// to MaxBackoff, and each delay is drawn at random below its bound.
	Backoff, MaxBackoff time.Duration
	// HeaderTimeout bounds the wait for the response headers of one try.
	HeaderTimeout time.Duration
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
				return nil, ctx.Err()
			}
			return nil, err
		}
		wait := c.backoff(attempt)
		if retryAfter > 0 {
			wait = min(retryAfter, time.Minute)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
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
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return resp, 0, nil
	}
	defer cancel()
	defer resp.Body.Close()
	detail := errorDetail(resp.Body)
	status := fmt.Sprintf("HTTP %d", resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint := "check the API key"
		if c.KeyEnv != "" {
			hint = "set " + c.KeyEnv + " to a valid API key"
		}
		return nil, -1, errs.New(llm.ProviderFailed, fmt.Sprintf("%s rejected the credentials (%s: %s); %s", c.Provider, status, detail, hint)).WithReason(ReasonUnauthorized)
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, retryAfter(resp.Header.Get("Retry-After")), errs.New(llm.ProviderFailed, fmt.Sprintf("%s is rate limiting (%s: %s)", c.Provider, status, detail)).WithReason(ReasonRateLimited)
	case resp.StatusCode >= 500:
		return nil, retryAfter(resp.Header.Get("Retry-After")), errs.New(llm.ProviderFailed, fmt.Sprintf("%s had a server error (%s: %s)", c.Provider, status, detail)).WithReason(ReasonServerError)
	}
	return nil, -1, errs.New(llm.ProviderFailed, fmt.Sprintf("%s refused the request (%s: %s)", c.Provider, status, detail)).WithReason(ReasonBadRequest)
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

// errorDetail extracts the message of an error body.
func errorDetail(r io.Reader) string {
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

type cancelOnClose struct {
	io.ReadCloser
	cancel stdctx.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
