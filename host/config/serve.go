package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/services/session"
	"github.com/robfig/cron/v3"
)

// ServeConfig is the serve: key: what `dsh serve` listens on, who may call
// it, and its unattended sources (webhooks and schedules). Every field is
// optional; the zero value listens on DefaultListen and wants a token.
type ServeConfig struct {
	// Listen is the address to listen on, host:port; default
	// DefaultListen (loopback only).
	Listen string `koanf:"listen"`
	// TokenEnv names the variable that holds the bearer token; default
	// DefaultTokenEnv. TokenFile, when set, is read instead.
	TokenEnv  string `koanf:"token_env"`
	TokenFile string `koanf:"token_file"`
	// Tokens are named bearer tokens, each read from its own variable or
	// file: a request's token names its principal (kind "token", id the
	// name), which policies, quotas and the decision records see. They
	// come in addition to the single token of token_env/token_file.
	Tokens []TokenConfig `koanf:"tokens"`
	// JWT, when its issuer is set, accepts bearer tokens that are JWTs
	// signed by a key of the issuer's key set (JWKS): the subject becomes
	// the principal (kind "jwt") and a claim may name the tenant.
	JWT JWTConfig `koanf:"jwt"`
	// NoAuth serves without a token. It is refused unless Listen is a
	// loopback address: anyone who can reach the port could run tools.
	NoAuth bool `koanf:"no_auth"`
	// CORSOrigins are the origins a browser may call the API from; none
	// by default (the embedded page is same-origin).
	CORSOrigins []string `koanf:"cors_origins"`
	// MaxBodyBytes bounds a request body; default DefaultMaxBody.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// ShutdownTimeout bounds a graceful shutdown: turns still running
	// when it ends are cancelled; default 10s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// ApproverGrace is how long a tool call's approval question waits
	// for an approving client when none is attached (a page reloading, a
	// stream reconnecting, the clients of a session this host took over
	// from another); past it the call is refused. Default
	// DefaultApproverGrace; a negative value refuses at once.
	ApproverGrace time.Duration `koanf:"approver_grace"`
	// Agent is the agent a session created without one runs; default
	// the first configured. Presets are added to every such session's.
	Agent   string   `koanf:"agent"`
	Presets []string `koanf:"presets"`
	// Workspaces are the directories a client may open a session on
	// (POST /v1/sessions {"workspace": …}), each with the directories
	// under it. By default none: a session runs in its agent's own
	// workspace, and a client that names another is refused. After Load
	// they are absolute, clean and free of symbolic links.
	Workspaces []string `koanf:"workspaces"`
	// ClientPresets are the presets a client may add to a session
	// ({"presets": […]}). By default none beyond those the agent and
	// serve.presets mount anyway.
	ClientPresets []string `koanf:"client_presets"`
	// Webhooks map a name (the {name} of POST /hooks/{name}) to what its
	// deliveries prompt.
	Webhooks map[string]WebhookConfig `koanf:"webhooks"`
	// Schedules prompt agents at the times of cron expressions.
	Schedules []ScheduleConfig `koanf:"schedules"`
	// StateDir keeps the server's own state (the schedules' last runs);
	// default .dsh/serve under the config file's directory.
	StateDir string `koanf:"state_dir"`
}

// TokenConfig is one named bearer token of serve.tokens.
type TokenConfig struct {
	// Name is the principal the token stands for: letters, digits, '.',
	// '_', '-' or '@'; unique.
	Name string `koanf:"name"`
	// Env names the variable holding the token; File a file holding it
	// (mode 0600). Exactly one.
	Env  string `koanf:"env"`
	File string `koanf:"file"`
	// Tenant is the group the principal belongs to, for policies and
	// quotas; optional.
	Tenant string `koanf:"tenant"`
}

// JWTConfig verifies bearer tokens that are JWTs.
type JWTConfig struct {
	// Issuer must equal the token's iss claim; setting it turns JWT
	// verification on.
	Issuer string `koanf:"issuer"`
	// JWKSURL is where the issuer publishes its public keys (https, or
	// http on a loopback address); they are fetched at start and
	// refreshed every RefreshInterval, and at once (at most every
	// minute) when a token names a key id not in the set.
	JWKSURL string `koanf:"jwks_url"`
	// Audience, when set, must be among the token's aud claim.
	Audience string `koanf:"audience"`
	// SubjectClaim names the claim that becomes the principal's id;
	// default "sub".
	SubjectClaim string `koanf:"subject_claim"`
	// TenantClaim names the claim that becomes the principal's tenant;
	// Tenant is the tenant when it is unset or the token lacks it.
	TenantClaim string `koanf:"tenant_claim"`
	Tenant      string `koanf:"tenant"`
	// Algorithms are the signing algorithms accepted; default RS256,
	// ES256 and EdDSA. "none" and HMAC algorithms are refused: the key
	// set is public.
	Algorithms []string `koanf:"algorithms"`
	// Leeway tolerates clock skew on exp, nbf and iat; default 30s.
	Leeway time.Duration `koanf:"leeway"`
	// RefreshInterval is how often the key set is fetched again; default
	// 1h.
	RefreshInterval time.Duration `koanf:"refresh_interval"`
}

// Enabled reports whether JWT verification is configured.
func (j JWTConfig) Enabled() bool { return j.Issuer != "" || j.JWKSURL != "" }

// tokenName is what a named token may be called.
var tokenName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// jwtAlgorithms are the algorithms serve.jwt.algorithms may name.
var jwtAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// checkAuth reports the mistakes of serve.tokens and serve.jwt.
func (s *ServeConfig) checkAuth(p *problems) {
	seen := map[string]int{}
	for i, t := range s.Tokens {
		at := fmt.Sprintf("serve.tokens[%d]", i)
		switch {
		case !tokenName.MatchString(t.Name):
			p.add(at+".name", fmt.Sprintf("token name %q must be 1-64 letters, digits, '.', '_', '-' or '@', starting with a letter or digit: it names the principal the token stands for", t.Name))
		case seen[t.Name] > 0:
			p.add(at+".name", fmt.Sprintf("token name %q is also serve.tokens[%d]; names must be unique", t.Name, seen[t.Name]-1))
		default:
			seen[t.Name] = i + 1
		}
		if (t.Env == "") == (t.File == "") {
			p.add(at, "set env (the variable holding the token) or file (a file holding it), exactly one")
		}
	}
	if s.NoAuth && (len(s.Tokens) > 0 || s.JWT.Enabled()) {
		p.add("serve.no_auth", "no_auth serves without any token, and tokens or jwt are set too; keep one")
	}
	j := s.JWT
	if !j.Enabled() {
		return
	}
	if j.Issuer == "" {
		p.add("serve.jwt", "jwks_url is set but issuer is not; set issuer to the iss claim the tokens carry")
	}
	if j.JWKSURL == "" {
		p.add("serve.jwt", "issuer is set but jwks_url is not; set it to the URL of the issuer's JSON Web Key Set")
	} else if u, err := url.Parse(j.JWKSURL); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) {
		p.add("serve.jwt.jwks_url", fmt.Sprintf("%q is not an https URL (http only on a loopback address): the keys that vouch for every caller must not be fetched in the clear", j.JWKSURL))
	}
	for i, a := range j.Algorithms {
		if !slices.Contains(jwtAlgorithms, a) {
			p.add(fmt.Sprintf("serve.jwt.algorithms[%d]", i), fmt.Sprintf("%q is not an algorithm serve accepts; use one of %s", a, strings.Join(jwtAlgorithms, ", ")))
		}
	}
	if j.Leeway < 0 || j.RefreshInterval < 0 {
		p.add("serve.jwt", "leeway and refresh_interval cannot be negative")
	}
}

// Defaults of the serve: key.
const (
	DefaultListen   = "127.0.0.1:7433"
	DefaultTokenEnv = "DSH_SERVE_TOKEN"
	DefaultMaxBody  = 1 << 20
	// DefaultApproverGrace is serve.approver_grace's default: long
	// enough for a browser to reload or a client to reconnect to another
	// host, short enough that a call nobody will answer is refused soon.
	DefaultApproverGrace = 15 * time.Second
)

// ApproverGraceOrDefault is serve.approver_grace with its default; 0 means
// no grace.
func (s ServeConfig) ApproverGraceOrDefault() time.Duration {
	switch {
	case s.ApproverGrace < 0:
		return 0
	case s.ApproverGrace == 0:
		return DefaultApproverGrace
	}
	return s.ApproverGrace
}

// WebhookConfig maps one webhook onto an agent and a prompt.
type WebhookConfig struct {
	// Agent receives the deliveries (default serve.agent, else the first
	// configured); Presets are added to its own.
	Agent   string   `koanf:"agent"`
	Presets []string `koanf:"presets"`
	// SecretEnv names the variable holding the HMAC-SHA256 secret;
	// required: an unsigned webhook is refused.
	SecretEnv string `koanf:"secret_env"`
	// SignatureHeader carries "sha256=<hex of HMAC(secret, body)>";
	// default X-Hub-Signature-256 (GitHub's).
	SignatureHeader string `koanf:"signature_header"`
	// Scheme is how deliveries are signed: "github" (the default: an HMAC
	// of the body in SignatureHeader) or "standard" (Standard Webhooks:
	// webhook-id, webhook-timestamp and webhook-signature, an HMAC of the
	// id, the timestamp and the body, with a replay window).
	Scheme string `koanf:"scheme"`
	// Prompt is a text/template over the delivery: .Name, .Body (the
	// JSON body decoded, nil when it is not JSON), .Raw (the body as
	// text), .Header (http.Header; {{.Header.Get "X-GitHub-Event"}}).
	Prompt string `koanf:"prompt"`
	// Session delivers into this session (resumed, or created, and kept
	// open); empty opens a new session per delivery, closed when its
	// turn ends.
	Session string `koanf:"session"`
	// MaxBodyBytes bounds a delivery's body; default serve's.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// Tenant is the tenant of the sessions the deliveries open, and of
	// the webhook's principal; empty leaves them to operators.
	Tenant string `koanf:"tenant"`
}

// ScheduleConfig prompts an agent at the times of a cron expression.
type ScheduleConfig struct {
	// Name identifies the schedule in logs, state and events; required,
	// unique.
	Name string `koanf:"name"`
	// Cron is a five-field cron expression or a descriptor (@hourly,
	// @every 1h30m), optionally prefixed with CRON_TZ=<zone>.
	Cron string `koanf:"cron"`
	// Agent and Presets as for webhooks.
	Agent   string   `koanf:"agent"`
	Presets []string `koanf:"presets"`
	// Prompt is a text/template: .Name, .Time (the scheduled time).
	Prompt string `koanf:"prompt"`
	// Session delivers every run into this session (resumed or created,
	// kept open); empty opens a new session per run.
	Session string `koanf:"session"`
	// Overlap is what a run does while the previous one's turn still
	// runs: "skip" (default) or "queue" (run when it ends; at most one
	// waits).
	Overlap string `koanf:"overlap"`
	// CatchUp runs once at start when a run was due while dsh was down;
	// by default missed runs are not replayed.
	CatchUp bool `koanf:"catch_up"`
	// Tenant is the tenant of the sessions the runs open, and of the
	// schedule's principal; empty leaves them to operators.
	Tenant string `koanf:"tenant"`
}

// Overlap policies of a schedule.
const (
	OverlapSkip  = "skip"
	OverlapQueue = "queue"
)

// CronParser parses the cron expressions of schedules: five fields
// (minute hour day-of-month month day-of-week) or a descriptor.
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// webhookName is what may follow /hooks/ in a URL.
var webhookName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ServeAgent returns the agent serve opens a session of when the request
// names agent (or none): the named one, else serve.agent, else the first.
func (c *Config) ServeAgent(agent string) (string, bool) {
	for _, id := range []string{agent, c.Serve.Agent} {
		if id != "" {
			_, ok := c.Agent(id)
			return id, ok
		}
	}
	if len(c.Agents) == 0 {
		return "", false
	}
	return c.Agents[0].ID, true
}

// checkServe reports the mistakes of the serve: key that decoding cannot.
func (c *Config) checkServe(p *problems) {
	s := &c.Serve
	if s.Listen != "" {
		host, port, err := net.SplitHostPort(s.Listen)
		if err != nil || port == "" {
			p.add("serve.listen", fmt.Sprintf("%q is not host:port; write e.g. 127.0.0.1:7433, or :7433 for every interface", s.Listen))
		} else if s.NoAuth && !loopback(host) {
			p.add("serve.no_auth", fmt.Sprintf("no_auth is allowed only on a loopback address, and listen is %q: anyone who reaches the port could run the agents' tools; set a token (token_env or token_file) or listen on 127.0.0.1", s.Listen))
		}
	}
	if s.TokenFile != "" && s.TokenEnv != "" {
		p.add("serve.token_file", "set token_env or token_file, not both")
	}
	s.checkAuth(p)
	if s.MaxBodyBytes < 0 {
		p.add("serve.max_body_bytes", "cannot be negative; leave it out for the default (1 MiB)")
	}
	if s.ShutdownTimeout < 0 {
		p.add("serve.shutdown_timeout", "cannot be negative; leave it out for the default (10s)")
	}
	c.checkServeAgent(p, "serve", s.Agent, s.Presets)
	c.checkClientChoices(p)
	for _, name := range slices.Sorted(maps.Keys(s.Webhooks)) {
		w := s.Webhooks[name]
		at := "serve.webhooks." + name
		if !webhookName.MatchString(name) {
			p.add(at, fmt.Sprintf("webhook name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit: it is the {name} of POST /hooks/{name}", name))
		}
		c.checkServeAgent(p, at, w.Agent, w.Presets)
		if w.SecretEnv == "" {
			p.add(at, "the webhook has no secret_env; name the variable holding its HMAC-SHA256 secret (unsigned deliveries are refused)")
		}
		if w.Scheme != "" && w.Scheme != "github" && w.Scheme != "standard" {
			p.add(at+".scheme", fmt.Sprintf("scheme %q is not a signing scheme; use github (the default) or standard (Standard Webhooks)", w.Scheme))
		}
		if w.MaxBodyBytes < 0 {
			p.add(at+".max_body_bytes", "cannot be negative")
		}
		checkTemplate(p, at+".prompt", w.Prompt)
		checkSessionID(p, at+".session", w.Session)
	}
	names := map[string]int{}
	for i, sc := range s.Schedules {
		at := fmt.Sprintf("serve.schedules[%d]", i)
		switch {
		case sc.Name == "":
			p.add(at, "the schedule has no name; add name: <name>")
		case names[sc.Name] > 0:
			p.add(at+".name", fmt.Sprintf("schedule %q is also serve.schedules[%d]; names must be unique", sc.Name, names[sc.Name]-1))
		default:
			names[sc.Name] = i + 1
		}
		if sc.Cron == "" {
			p.add(at, "the schedule has no cron; add e.g. cron: \"0 9 * * 1-5\" or cron: \"@hourly\"")
		} else if _, err := CronParser.Parse(sc.Cron); err != nil {
			p.add(at+".cron", fmt.Sprintf("%q: %v; use five fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily or @every 1h", sc.Cron, err))
		}
		c.checkServeAgent(p, at, sc.Agent, sc.Presets)
		checkTemplate(p, at+".prompt", sc.Prompt)
		checkSessionID(p, at+".session", sc.Session)
		switch sc.Overlap {
		case "", OverlapSkip, OverlapQueue:
		default:
			p.add(at+".overlap", fmt.Sprintf("%q is not an overlap policy; use skip or queue", sc.Overlap))
		}
	}
}

func (c *Config) checkServeAgent(p *problems, at, agent string, presets []string) {
	if agent != "" {
		if _, ok := c.Agent(agent); !ok {
			p.add(at+".agent", fmt.Sprintf("no agent %q; configured agents: %s", agent, orNone(c.AgentIDs())))
		}
	}
	for i, name := range presets {
		// A built-in preset no agent uses is not in c.Presets, yet serve
		// mounts it as it would one the config names (Config.Preset).
		if _, ok := c.Presets[name]; !ok && !slices.Contains(builtinNames(), name) {
			p.add(fmt.Sprintf("%s.presets[%d]", at, i), fmt.Sprintf("preset %q is not defined; defined presets: %s; built-in: %s", name, orNone(c.DefinedPresets()), strings.Join(builtinNames(), ", ")))
		}
	}
}

func checkTemplate(p *problems, at, text string) {
	if strings.TrimSpace(text) == "" {
		p.add(at, "the prompt is empty; write the text to send (a text/template)")
		return
	}
	if _, err := template.New(at).Option("missingkey=zero").Parse(text); err != nil {
		p.add(at, fmt.Sprintf("not a valid text/template: %v", err))
	}
}

func checkSessionID(p *problems, at, id string) {
	if id != "" && !session.ValidID(id) {
		p.add(at, fmt.Sprintf("session id %q is not a session id: use %s", id, session.IDRule))
	}
}

// ServeStateDir is where dsh serve keeps its state: serve.state_dir,
// relative to the config file's directory, by default .dsh/serve there.
func (c *Config) ServeStateDir() string {
	dir := c.wd
	if c.File != "" {
		dir = filepath.Dir(c.File)
	}
	switch {
	case c.Serve.StateDir == "":
		return filepath.Join(dir, ".dsh", "serve")
	case filepath.IsAbs(c.Serve.StateDir):
		return c.Serve.StateDir
	}
	return filepath.Join(dir, c.Serve.StateDir)
}

// IsLoopback reports whether host (of a host:port) reaches this machine
// only: localhost or a loopback IP.
func IsLoopback(host string) bool { return loopback(host) }

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secretVariables are the variables the file names as holding secrets —
// serve's token (DefaultTokenEnv unless token_env says otherwise) and the
// webhooks' secret_env — read from the file before any override. A name
// among them that starts with DSH_ is a secret, not a config override:
// without this, exporting DSH_SERVE_TOKEN would fail every command with an
// unknown key.
func secretVariables(raw map[string]any) map[string]bool {
	names := map[string]bool{DefaultTokenEnv: true}
	serve, _ := raw["serve"].(map[string]any)
	if v, ok := serve["token_env"].(string); ok && v != "" {
		names[v] = true
	}
	tokens, _ := serve["tokens"].([]any)
	for _, t := range tokens {
		if m, ok := t.(map[string]any); ok {
			if v, ok := m["env"].(string); ok && v != "" {
				names[v] = true
			}
		}
	}
	hooks, _ := serve["webhooks"].(map[string]any)
	for _, h := range hooks {
		if m, ok := h.(map[string]any); ok {
			if v, ok := m["secret_env"].(string); ok && v != "" {
				names[v] = true
			}
		}
	}
	return names
}
