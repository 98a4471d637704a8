package budget

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/services/usage"
)

// Per names what a limit counts for: each distinct principal, tenant,
// agent or session has its own counters.
type Per string

// The things a limit can count per.
const (
	PerPrincipal Per = "principal"
	PerTenant    Per = "tenant"
	PerAgent     Per = "agent"
	PerSession   Per = "session"
)

// Limit is one budget: what it counts per, over which window, and its
// ceilings. A zero ceiling is no ceiling.
type Limit struct {
	// Name names the limit in refusals and in the store's keys: renaming
	// it starts its counters afresh.
	Name string `koanf:"name" json:"name"`
	// Per is principal, tenant, agent or session.
	Per Per `koanf:"per" json:"per"`
	// Window is the period tokens, cost and prompts are counted over
	// (fixed windows aligned to the Unix epoch, so 24h is a UTC day); 0
	// counts tokens and cost for ever. Prompts need a window.
	Window time.Duration `koanf:"window" json:"window,omitempty"`
	// Tokens caps input plus output tokens of the model calls.
	Tokens int64 `koanf:"tokens" json:"tokens,omitempty"`
	// Cost caps what the model calls cost, priced by the config's
	// pricing: key, in its currency.
	Cost float64 `koanf:"cost" json:"cost,omitempty"`
	// Prompts caps the prompts admitted in a window.
	Prompts int64 `koanf:"prompts" json:"prompts,omitempty"`
	// ConcurrentTurns caps the prompts admitted and not yet done: queued
	// or in the turn that runs them. One more is held until one is done.
	ConcurrentTurns int64 `koanf:"concurrent_turns" json:"concurrent_turns,omitempty"`
}

// Config is the budget plugin's configuration.
type Config struct {
	// Limits are checked in order; the first that is spent decides.
	Limits []Limit `koanf:"limits" json:"limits"`
	// Store is where the counters live: memory (this process, lost on
	// restart) or nats (a JetStream key-value bucket: shared by every
	// host using it, and kept across restarts).
	Store string `koanf:"store" json:"store,omitempty"`
	// NATS configures the nats store.
	NATS NATSConfig `koanf:"nats" json:"nats,omitzero"`
	// Hold is how long a prompt waits for a concurrent-turns slot before
	// it is refused (default 30s).
	Hold time.Duration `koanf:"hold" json:"hold,omitempty"`
	// UnattendedHold is the wait for a prompt nobody waits behind (a
	// webhook, a schedule): default 0, refused at once.
	UnattendedHold time.Duration `koanf:"unattended_hold" json:"unattended_hold,omitempty"`
	// SlotTTL bounds how long a concurrent-turns slot counts when nobody
	// releases it (its host died): default 1h; keep it above your longest
	// turn.
	SlotTTL time.Duration `koanf:"slot_ttl" json:"slot_ttl,omitempty"`

	// pricing is the config's pricing: key (UsePricing).
	pricing usage.Pricing
}

// NATSConfig names the JetStream key-value bucket of the nats store.
type NATSConfig struct {
	// URL is the NATS server, or a comma-separated list of a cluster's.
	URL string `koanf:"url" json:"url,omitempty"`
	// CredentialsFile is a NATS .creds file; empty for no authentication.
	CredentialsFile string `koanf:"credentials_file" json:"credentials_file,omitempty"`
	// Bucket is the key-value bucket of the counters (default DSH_BUDGETS).
	Bucket string `koanf:"bucket" json:"bucket,omitempty"`
	// Replicas is how many servers keep the bucket (1, 3 or 5).
	Replicas int `koanf:"replicas" json:"replicas,omitempty"`
	// ConnectTimeout bounds connecting and each request (default 5s).
	ConnectTimeout time.Duration `koanf:"connect_timeout" json:"connect_timeout,omitempty"`
}

// Store kinds.
const (
	StoreMemory = "memory"
	StoreNATS   = "nats"
)

// Defaults are a memory store, a 30s hold and one-hour slots.
func (Config) Defaults() Config {
	return Config{
		Store: StoreMemory, Hold: 30 * time.Second, SlotTTL: time.Hour,
		NATS: NATSConfig{URL: "nats://127.0.0.1:4222", Bucket: "DSH_BUDGETS", Replicas: 1, ConnectTimeout: 5 * time.Second},
	}
}

// UsePricing takes the config's pricing: key (usage.PricedConfig); cost
// limits need it.
func (c *Config) UsePricing(p usage.Pricing) { c.pricing = p }

// WithPricing returns c pricing with p, for programs that build the config
// in Go rather than load it.
func (c Config) WithPricing(p usage.Pricing) Config { c.pricing = p; return c }

// ForReplay is c counting in memory (config.Replayable): a replay
// decides as the live budget would from empty counters, and never spends
// or reads the shared ones.
func (c Config) ForReplay() any {
	c.Store, c.NATS = "memory", NATSConfig{}
	return c
}

var name = lazyregexp.New(`^[A-Za-z0-9_-]+$`)

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return errs.New(errs.InvalidArgument, "budget: "+fmt.Sprintf(format, a...))
	}
	if len(c.Limits) == 0 {
		return bad("limits is empty; add at least one, e.g. {name: daily, per: principal, window: 24h, tokens: 1000000}")
	}
	seen := map[string]int{}
	for i, l := range c.Limits {
		at := fmt.Sprintf("limits[%d]", i)
		switch {
		case !name.MatchString(l.Name):
			return bad("%s.name %q: name each limit with letters, digits, '_' and '-' (it keys its counters)", at, l.Name)
		case seen[l.Name] > 0:
			return bad("%s.name %q is also limits[%d]'s; names must differ", at, l.Name, seen[l.Name]-1)
		}
		seen[l.Name] = i + 1
		switch l.Per {
		case PerPrincipal, PerTenant, PerAgent, PerSession:
		default:
			return bad("%s.per is %q; use principal, tenant, agent or session", at, l.Per)
		}
		switch {
		case l.Window < 0:
			return bad("%s.window is %s; use a positive period such as 1h or 24h, or leave it out to count for ever", at, l.Window)
		case l.Tokens < 0 || l.Prompts < 0 || l.ConcurrentTurns < 0:
			return bad("%s: tokens, prompts and concurrent_turns cannot be negative; leave one out for no ceiling", at)
		case l.Cost < 0 || math.IsNaN(l.Cost) || math.IsInf(l.Cost, 0):
			return bad("%s.cost is %v; use a positive amount in the pricing: currency", at, l.Cost)
		case l.Tokens == 0 && l.Cost == 0 && l.Prompts == 0 && l.ConcurrentTurns == 0:
			return bad("%s (%s) sets no ceiling; set tokens, cost, prompts or concurrent_turns", at, l.Name)
		case l.Prompts > 0 && l.Window == 0:
			return bad("%s.prompts needs a window, e.g. window: 1h", at)
		case l.Cost > 0 && len(c.pricing.Models) == 0:
			return bad("%s.cost needs prices: add a pricing: key with the models your agents use (see docs/usage.md)", at)
		}
	}
	switch c.Store {
	case StoreMemory, "":
	case StoreNATS:
		n := c.NATS
		switch {
		case strings.TrimSpace(n.URL) == "":
			return bad("nats.url is empty; name the NATS server, e.g. nats://127.0.0.1:4222")
		case !name.MatchString(n.Bucket):
			return bad("nats.bucket %q is not a bucket name; use letters, digits, '_' and '-'", n.Bucket)
		case n.Replicas != 1 && n.Replicas != 3 && n.Replicas != 5:
			return bad("nats.replicas is %d; JetStream keeps 1, 3 or 5 copies", n.Replicas)
		case n.ConnectTimeout <= 0:
			return bad("nats.connect_timeout must be positive, e.g. 5s")
		}
	default:
		return bad("store is %q; use memory or nats", c.Store)
	}
	if c.Hold < 0 || c.UnattendedHold < 0 {
		return bad("hold and unattended_hold cannot be negative; 0 refuses at once")
	}
	if c.SlotTTL < time.Second {
		return bad("slot_ttl is %s; use at least 1s, above your longest turn, e.g. 1h", c.SlotTTL)
	}
	return nil
}

// version is a digest of the limits and the prices, which decide; it is
// the PolicyVersion of the plugin's decisions.
func (c Config) version() string {
	b, _ := json.Marshal(struct {
		Limits  []Limit       `json:"limits"`
		Pricing usage.Pricing `json:"pricing"`
	}{c.Limits, c.pricing})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
