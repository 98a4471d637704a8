package anthropic_test

import (
	stdctx "context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/anthropic"
	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/internal/llmtest"
	"github.com/dsh-go/dsh/services/llm"
)

const (
	messageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n"
	firstText    = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
)

func tuned(t *testing.T, answers []llmtest.Answer, set func(*httpx.Common)) (*anthropic.Provider, *llmtest.Replay) {
	t.Helper()
	s, rec := llmtest.Serve(t, "testdata", answers...)
	cfg := anthropic.Config{Common: httpx.Common{BaseURL: s.URL, APIKeyEnv: "TEST_KEY", Model: "claude-test", RetryBackoff: time.Millisecond}}
	set(&cfg.Common)
	p, err := anthropic.New(cfg, func(k string) string { return map[string]string{"TEST_KEY": "sk-ant"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

// message_start carries no chunk: a stall after it is still "nothing
// streamed yet", and the request is sent again.
func TestStallAfterMessageStartIsRetried(t *testing.T) {
	p, rec := tuned(t, []llmtest.Answer{{Stall: true, Body: messageStart}, {File: "text.sse"}},
		func(c *httpx.Common) { c.IdleTimeout = 50 * time.Millisecond })
	a, _, err := llmtest.Collect(p, hello())
	if err != nil || a.Message().Content != "Hello!" {
		t.Fatalf("%v %+v", err, a)
	}
	if n := len(rec.Requests()); n != 2 {
		t.Fatalf("want the stalled request sent again, got %d requests", n)
	}
}

func TestStallBeforeAnyDataFailsWhenOutOfRetries(t *testing.T) {
	p, rec := tuned(t, []llmtest.Answer{{Stall: true}},
		func(c *httpx.Common) { c.IdleTimeout = 50 * time.Millisecond; c.Retries = -1 })
	_, _, err := llmtest.Collect(p, hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonStalled) || !strings.Contains(err.Error(), "anthropic") || !strings.Contains(err.Error(), "50ms") {
		t.Fatalf("want a stall error naming the provider and the timeout, got %v", err)
	}
	if n := len(rec.Requests()); n != 1 {
		t.Fatalf("retries: -1 means one try, got %d", n)
	}
}

func TestStallMidStreamIsNotRetried(t *testing.T) {
	p, rec := tuned(t, []llmtest.Answer{{Stall: true, Body: messageStart + firstText}, {File: "text.sse"}},
		func(c *httpx.Common) { c.IdleTimeout = 50 * time.Millisecond })
	a, _, err := llmtest.Collect(p, hello())
	if !errs.Has(err, llm.ProviderFailed, httpx.ReasonStalled) {
		t.Fatalf("want a stall error, got %v", err)
	}
	if a.Message().Content != "Hel" || len(rec.Requests()) != 1 {
		t.Fatalf("the text before the stall is kept and nothing is retried: %q, %d requests", a.Message().Content, len(rec.Requests()))
	}
}

func TestCancelWhileWaitingEndsTheStreamWithTheCause(t *testing.T) {
	p, _ := tuned(t, []llmtest.Answer{{Stall: true, Body: messageStart + firstText}}, func(*httpx.Common) {})
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	st, err := p.Stream(ctx, hello())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := st.Recv(); err != nil || c.Text != "Hel" {
		t.Fatalf("%+v %v", c, err)
	}
	abort := errors.New("user pressed ctrl-c")
	go cancel(abort)
	if _, err := st.Recv(); !errors.Is(err, abort) {
		t.Fatalf("a cancelled stream must end with the cancel's cause, got %v", err)
	}
}

func TestBaseURLKeepsTheDefaultKeyVariable(t *testing.T) {
	s, rec := llmtest.Serve(t, "testdata", llmtest.Answer{File: "text.sse"})
	p, err := anthropic.New(anthropic.Config{Common: httpx.Common{BaseURL: s.URL, Model: "claude-test"}},
		func(k string) string { return map[string]string{"ANTHROPIC_API_KEY": "sk-ant-default"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := llmtest.Collect(p, hello()); err != nil {
		t.Fatal(err)
	}
	if got := rec.Headers()[0].Get("x-api-key"); got != "sk-ant-default" {
		t.Fatalf("a proxy behind base_url must get the key of ANTHROPIC_API_KEY; x-api-key %q", got)
	}
}
