package openai_test

import (
	stdctx "context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/openai"
	"github.com/dsh-go/dsh/services/llm"
)

const chunkA = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"

// tuned builds an OpenAI provider on s with the test key and the settings
// set applies; short timeouts keep the stall tests fast.
func tuned(t *testing.T, s *httptest.Server, set func(*httpx.Common)) *openai.Provider {
	t.Helper()
	cfg := openai.Config{Common: httpx.Common{BaseURL: s.URL, APIKeyEnv: "TEST_KEY", Model: "m", RetryBackoff: time.Millisecond}}
	set(&cfg.Common)
	p, err := openai.NewOpenAI(cfg, func(k string) string { return map[string]string{"TEST_KEY": "sk-test"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStallBeforeTheFirstChunkIsRetried(t *testing.T) {
	s, rec := server(t, answer{Stall: true}, answer{File: "text.sse"})
	p := tuned(t, s, func(c *httpx.Common) { c.IdleTimeout = 50 * time.Millisecond })
	a, _, err := collect(t, p, hello())
	if err != nil || a.Message().Content != "Hello, world" {
		t.Fatalf("%v %+v", err, a)
	}
	if n := len(rec.Requests()); n != 2 {
		t.Fatalf("a stream that stalled before its first chunk must be opened again: %d requests", n)
	}
}

func TestStallBeforeTheFirstChunkFailsWhenOutOfRetries(t *testing.T) {
	s, rec := server(t, answer{Stall: true})
	p := tuned(t, s, func(c *httpx.Common) { c.IdleTimeout = 50 * time.Millisecond; c.Retries = 1 })
	_, _, err := collect(t, p, hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonStalled) {
		t.Fatalf("want a stall error, got %v", err)
	}
	for _, want := range []string{"openai", "50ms", "idle_timeout", "before any data"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the stall error must say %q: %v", want, err)
		}
	}
	if n := len(rec.Requests()); n != 2 {
		t.Fatalf("retries: 1 means two tries, got %d", n)
	}
}

func TestStallMidStreamIsNotRetried(t *testing.T) {
	s, rec := server(t, answer{Stall: true, Body: chunkA}, answer{File: "text.sse"})
	p := tuned(t, s, func(c *httpx.Common) { c.IdleTimeout = 50 * time.Millisecond })
	a, chunks, err := collect(t, p, hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonStalled) || !strings.Contains(err.Error(), "after") {
		t.Fatalf("want a mid-stream stall, got %v", err)
	}
	if len(chunks) != 1 || a.Message().Content != "a" {
		t.Fatalf("the chunk before the stall must be kept: %+v", chunks)
	}
	if n := len(rec.Requests()); n != 1 {
		t.Fatalf("a stall after a chunk was handed out must not be retried: %d requests", n)
	}
}

// The idle clock runs while the provider waits for the server, not while
// the caller works between chunks: a slow caller is not a stalled server.
func TestSlowReaderIsNotAStall(t *testing.T) {
	s, _ := server(t, answer{File: "text.sse"})
	p := tuned(t, s, func(c *httpx.Common) { c.IdleTimeout = 20 * time.Millisecond })
	st, err := p.Stream(stdctx.Background(), hello())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var text strings.Builder
	for {
		c, err := st.Recv()
		if err != nil {
			t.Fatalf("after %q: %v", text.String(), err)
		}
		text.WriteString(c.Text)
		if c.Kind == llm.ChunkFinish {
			break
		}
		time.Sleep(30 * time.Millisecond) // the caller busy with the chunk
	}
	if text.String() != "Hello, world" {
		t.Fatalf("text %q", text.String())
	}
}

func TestErrorBodyThatStallsIsBounded(t *testing.T) {
	s, _ := server(t, answer{Status: 503, Stall: true, Body: `{"error":`})
	p := tuned(t, s, func(c *httpx.Common) { c.Timeout = 50 * time.Millisecond; c.Retries = -1 })
	_, _, err := collect(t, p, hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonServerError) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("want the 503 reported, got %v", err)
	}
}

func TestCancelWhileWaitingEndsTheStreamWithTheCause(t *testing.T) {
	s, _ := server(t, answer{Stall: true, Body: chunkA})
	p := tuned(t, s, func(c *httpx.Common) {}) // the default idle timeout: only the cancel can end it
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	st, err := p.Stream(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := st.Recv(); err != nil || c.Text != "a" {
		t.Fatalf("%+v %v", c, err)
	}
	abort := errors.New("user pressed ctrl-c")
	go cancel(abort)
	if _, err := st.Recv(); !errors.Is(err, abort) {
		t.Fatalf("a cancelled stream must end with the cancel's cause, got %v", err)
	}
}

// A cancel during a Retry-After wait ends the wait at once, with its cause.
func TestCancelDuringRetryWaitReturnsTheCause(t *testing.T) {
	s, rec := server(t, answer{Status: 429, Header: map[string]string{"Retry-After": "30"}, Body: "slow down"})
	p := tuned(t, s, func(*httpx.Common) {})
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	abort := errors.New("user pressed ctrl-c")
	go func() {
		for len(rec.Requests()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel(abort)
	}()
	if _, err := p.Stream(ctx, hello()); !errors.Is(err, abort) {
		t.Fatalf("want the cancel's cause, got %v", err)
	}
}
