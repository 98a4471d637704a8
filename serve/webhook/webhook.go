// Package webhook serves POST /hooks/{name} for dsh serve: a delivery whose
// HMAC-SHA256 signature checks out is rendered into a prompt by its
// webhook's template and delivered to the webhook's agent through the
// session controller, as an unattended source (kind webhook). The caller
// gets 202 at once; the turn runs in the background, and a tool call in it
// that needs approval is refused rather than left waiting for a person.
package webhook

import (
	stdctx "context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve/unattended"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// Options configure the webhooks handler.
type Options struct {
	// Sessions is the session service the webhooks deliver through: the host's
	// controller, or one that forwards to the host that runs a session.
	Sessions sessions.Service
	// Config holds the webhooks (serve.webhooks) and the defaults they
	// fall back on (serve.agent, serve.max_body_bytes).
	Config *config.Config
	// Getenv reads the webhooks' secrets; nil reads the process
	// environment.
	Getenv func(string) string
	Log    *slog.Logger
	// Now is the clock the replay window is checked against; nil is
	// time.Now.
	Now func() time.Time
	// Spool, when set, is the directory that keeps each accepted delivery
	// until its request has an outcome in its session's log, so a crash
	// loses none that was answered 202 (see spool.go). dsh serve passes
	// <serve.state_dir>/webhooks. Empty keeps none: a crash may then lose
	// a delivery that waited in the agent's inbox.
	Spool string
}

// hook is one configured webhook, ready to serve.
type hook struct {
	name   string
	secret []byte
	header string
	// standard: the Standard Webhooks scheme, not GitHub's.
	standard bool
	maxBody  int64
	prompt   *template.Template
	target   unattended.Target
}

// Handler serves the configured webhooks; mount it at /hooks/.
type Handler struct {
	hooks    map[string]*hook
	runner   *unattended.Runner
	log      *slog.Logger
	seen     *dedupe
	now      func() time.Time
	sessions sessions.Service
	spool    *spool
	// closing closes when Close begins: a replay waiting to try again
	// gives up (its delivery stays in the spool).
	closing   chan struct{}
	closeOnce sync.Once
	// settling counts the goroutines that wait for a spooled delivery's
	// outcome, and the replay.
	settling sync.WaitGroup
}

// DefaultSignatureHeader carries the signature unless a webhook names
// another: GitHub's.
const DefaultSignatureHeader = "X-Hub-Signature-256"

// New prepares every webhook of o.Config. It fails when a webhook's secret
// variable is unset or empty, its agent is unknown or its template does
// not parse: a webhook that could never accept a delivery is a config
// mistake to report at start, not at the first POST.
func New(o Options) (*Handler, error) {
	if o.Sessions == nil || o.Config == nil {
		return nil, errs.New(errs.InvalidArgument, "webhook.New: Options.Sessions and Options.Config are required")
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	serve := o.Config.Serve
	h := &Handler{hooks: map[string]*hook{}, log: log, seen: newDedupe(maxRemembered), now: o.Now, sessions: o.Sessions, closing: make(chan struct{})}
	if h.now == nil {
		h.now = time.Now
	}
	sp, err := openSpool(o.Spool)
	if err != nil {
		return nil, err
	}
	h.spool = sp
	for _, name := range slices.Sorted(maps.Keys(serve.Webhooks)) {
		hk, err := prepare(o.Config, name, serve.Webhooks[name], getenv)
		if err != nil {
			return nil, err
		}
		h.hooks[name] = hk
	}
	h.runner = unattended.New(o.Sessions, log)
	return h, nil
}

func prepare(cfg *config.Config, name string, w config.WebhookConfig, getenv func(string) string) (*hook, error) {
	at := "serve.webhooks." + name
	if w.Tenant != "" {
		if err := session.CheckTenant(w.Tenant); err != nil {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("webhook %q (%s): tenant %q cannot be used: %v; name it with at most %d printable characters", name, at, w.Tenant, err, session.MaxTenantLen))
		}
	}
	if w.SecretEnv == "" {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("webhook %q (%s) has no secret_env; name the variable holding its HMAC-SHA256 secret", name, at))
	}
	secret := getenv(w.SecretEnv)
	if secret == "" {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"webhook %q (%s): its secret variable %s is unset or empty; export it with the secret the sender signs deliveries with", name, at, w.SecretEnv))
	}
	key := []byte(secret)
	standard := w.Scheme == "standard"
	if standard {
		var err error
		if key, err = standardSecret(secret); err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf(
				"webhook %q (%s): its secret in %s starts with whsec_ but the rest is not base64; paste the secret as the sender shows it", name, at, w.SecretEnv))
		}
	}
	agent, ok := cfg.ServeAgent(w.Agent)
	if !ok {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"webhook %q (%s): no agent %q to deliver to; configured agents: %s", name, at, agent, strings.Join(cfg.AgentIDs(), ", ")))
	}
	tmpl, err := template.New(at + ".prompt").Option("missingkey=zero").Parse(w.Prompt)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("webhook %q (%s): the prompt is not a valid text/template", name, at))
	}
	header := w.SignatureHeader
	if header == "" {
		header = DefaultSignatureHeader
	}
	maxBody := w.MaxBodyBytes
	if maxBody == 0 {
		maxBody = cfg.Serve.MaxBodyBytes
	}
	if maxBody == 0 {
		maxBody = config.DefaultMaxBody
	}
	return &hook{
		name: name, secret: key, header: header, standard: standard, maxBody: maxBody, prompt: tmpl,
		target: unattended.Target{Agent: agent, Presets: w.Presets, Session: w.Session,
			Source: sessions.Source{Kind: sessions.SourceWebhook, RPCID: "webhook:" + name, Entry: "webhook",
				Principal: sessions.Principal{Kind: "webhook", ID: name, Tenant: w.Tenant}}},
	}, nil
}

// Close stops taking deliveries and waits for the turns they started;
// when ctx ends first, those turns are cancelled (their sessions are still
// closed, flushed, before Close returns).
func (h *Handler) Close(ctx stdctx.Context) error {
	h.closeOnce.Do(func() { close(h.closing) })
	err := h.runner.Close(ctx)
	h.settling.Wait()
	return err
}
