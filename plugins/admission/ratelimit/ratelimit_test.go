package ratelimit_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/admission/ratelimit"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

func TestBucketPerAgentAndSourceKind(t *testing.T) {
	now := time.Unix(0, 0)
	l, err := ratelimit.New(ratelimit.Config{PerMinute: 60, Burst: 2}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	take := func(agent string, kind agentcontroller.SourceKind) bool { ok, _ := l.Take(agent, kind); return ok }
	if first, second := take("a", "user"), take("a", "user"); !first || !second {
		t.Fatal("the burst must pass")
	}
	ok, retry := l.Take("a", "user")
	if ok || retry != 2*time.Second {
		t.Fatalf("third: ok=%v retry=%v", ok, retry)
	}
	if !take("b", "user") || !take("a", "webhook") {
		t.Fatal("other agents and source kinds have their own buckets")
	}
	now = now.Add(time.Second)
	if !take("a", "user") {
		t.Fatal("a second refills one token at 60 a minute")
	}
}

func TestRefusesThroughTheController(t *testing.T) {
	e := testkit.New(t)
	e.Apply(ratelimit.Plugin, ratelimit.Config{PerMinute: 1, Burst: 1})
	a := e.Agent("a")
	if _, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("1")); err != nil {
		t.Fatal(err)
	}
	_, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send("2"))
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != ratelimit.Reason || !strings.Contains(ref.Message, "retry in") {
		t.Fatalf("got %v", err)
	}
	if len(a.Messages()) != 1 {
		t.Fatalf("inbox %v", a.Messages())
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []any{ratelimit.Config{}, ratelimit.Config{PerMinute: 5, Burst: -1}, "fast", nil} {
		e := testkit.New(t)
		// Refused when handed over, before a fiber exists.
		if _, err := e.Root.Plugin(ratelimit.Plugin, cfg); !errs.Has(err, errs.InvalidArgument, plugin.ReasonInvalidConfig) || !strings.Contains(err.Error(), "admission.rate-limit") {
			t.Fatalf("config %#v: %v", cfg, err)
		}
	}
}
