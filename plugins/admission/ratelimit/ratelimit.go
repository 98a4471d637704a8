// Package ratelimit is the admission.rate-limit plugin: a token bucket per
// agent and source kind. A message that finds its bucket empty is refused
// with reason admission/rate-limited and told when to retry.
package ratelimit

import (
	stdctx "context"
	"fmt"
	"math"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
)

// Reason is the refusal reason.
const Reason = "admission/rate-limited"

// Config is the plugin's configuration.
type Config struct {
	// PerMinute is the sustained rate of messages per agent and source kind.
	PerMinute float64 `koanf:"per_minute" json:"per_minute"`
	// Burst is how many may arrive at once; default max(1, PerMinute/6).
	Burst int `koanf:"burst" json:"burst,omitempty"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.PerMinute <= 0 || math.IsInf(c.PerMinute, 0) || math.IsNaN(c.PerMinute) {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("admission.rate-limit: per_minute is %v; set a positive number of messages per minute", c.PerMinute))
	}
	if c.Burst < 0 {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("admission.rate-limit: burst is %d; set 0 for the default or a positive number", c.Burst))
	}
	return nil
}

// Clock returns the current time; tests replace it.
type Clock func() time.Time

type bucketKey struct {
	agent string
	kind  agentcontroller.SourceKind
}

type bucket struct {
	tokens float64
	last   time.Time
}

// Limiter is the plugin state of one fiber.
type Limiter struct {
	cfg     Config
	now     Clock
	mu      sync.Mutex
	buckets map[bucketKey]*bucket
}

// New returns a limiter for cfg reading time from now (time.Now if nil).
func New(cfg Config, now Clock) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Burst == 0 {
		cfg.Burst = max(1, int(cfg.PerMinute/6))
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{cfg: cfg, now: now, buckets: map[bucketKey]*bucket{}}, nil
}

// Take spends a token for the agent and kind, or says how long to wait.
func (l *Limiter) Take(agentID string, kind agentcontroller.SourceKind) (ok bool, retry time.Duration) {
	now := l.now()
	rate := l.cfg.PerMinute / 60 // tokens per second
	l.mu.Lock()
	defer l.mu.Unlock()
	k := bucketKey{agentID, kind}
	b := l.buckets[k]
	if b == nil {
		b = &bucket{tokens: float64(l.cfg.Burst), last: now}
		l.buckets[k] = b
	}
	b.tokens = math.Min(float64(l.cfg.Burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / rate * float64(time.Second))
	return false, wait.Round(time.Second) + time.Second
}

// forget drops the buckets of a disposed agent.
func (l *Limiter) forget(agentID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.buckets {
		if k.agent == agentID {
			delete(l.buckets, k)
		}
	}
}

func (l *Limiter) listen(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
	kind := a.Source.Kind
	if kind == "" {
		kind = agentcontroller.SourceUser
	}
	if ok, retry := l.Take(a.Agent.ID(), kind); !ok {
		return agentcontroller.Reject(Reason, fmt.Sprintf(
			"agent %q takes at most %g messages a minute from %s senders; retry in %s",
			a.Agent.ID(), l.cfg.PerMinute, kind, retry), false), nil
	}
	return next.Call(ctx, a)
}

// Plugin is admission.rate-limit.
var Plugin = plugin.Register("admission.rate-limit", "refuses messages beyond a per-agent, per-source-kind rate (token bucket)", func(ctx *dshctx.Context, cfg Config) error {
	l, err := New(cfg, nil)
	if err != nil {
		return err
	}
	return l.Mount(ctx)
})

// Mount registers the limiter's listeners in ctx.
func (l *Limiter) Mount(ctx *dshctx.Context) error {
	if _, err := agentcontroller.EventAdmission.On(ctx, l.listen); err != nil {
		return err
	}
	_, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error { l.forget(a.ID()); return nil })
	return err
}
