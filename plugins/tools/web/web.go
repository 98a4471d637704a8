// Package web is the tools.web plugin: web_fetch, which GETs a URL and
// returns its page as Markdown, and web_search, which asks a search API
// for titles, URLs and snippets.
//
// Every connection web_fetch makes goes through the egress policy of
// package egress, in the language the bash sandbox uses for
// sandbox.network: the policy judges the host name and every address it
// resolves to, at dial time, and the fetcher dials exactly those addresses,
// so a redirect hop is judged like the first URL and a name cannot be
// re-resolved to a loopback, private or link-local address after the
// check (DNS rebinding). Local addresses pass only when an allow entry
// names the host or covers the address, as for bash.
//
// web_search goes to the provider the operator configured (search.provider,
// its base URL and the key's variable), not to a host the model chose, so
// it does not pass through the policy. Providers register through
// RegisterProvider; Brave Search and Tavily ship. The key is read from the
// environment when the plugin starts and is never logged nor shown.
//
// Neither tool is mounted unless a preset or the config names tools.web;
// both are parallel-safe.
package web

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/egress"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// KeyMissing: search.provider is set but its key's variable is empty.
const KeyMissing errs.Code = "WEB_SEARCH_KEY_MISSING"

// Plugin is tools.web.
var Plugin = plugin.Register("tools.web", "web_fetch (a URL as Markdown, through the egress policy) and web_search (a search API)",
	func(ctx *dshctx.Context, cfg Config) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		cfg = cfg.withDefaults()
		var on []string
		for _, name := range cfg.enabled() {
			if cfg.Inherit && svc.Lookup(ctx, name) != nil {
				ctx.Logger().Debug("tools.web: inherit: the tool of the scope around is kept", "tool", name, "agent", ctx.Tag())
				continue
			}
			on = append(on, name)
		}
		if slices.Contains(on, FetchTool) {
			p, err := cfg.policy()
			if err != nil {
				return err
			}
			f := newFetcher(cfg, p)
			if _, err := ctx.OnDispose("tools.web fetcher", func() error { f.close(); return nil }); err != nil {
				f.close()
				return err
			}
			f.onRefusal = func(agent, url string, e *errs.Error) {
				ctx.Logger().Warn("tools.web: the egress policy refused a fetch", "agent", agent, "url", url, "reason", e.Reason)
			}
			if err := svc.Register(ctx, f.tool()); err != nil {
				return err
			}
		}
		if slices.Contains(on, SearchTool) {
			s, err := newSearcher(cfg.Search, os.Getenv)
			if err != nil {
				return err
			}
			if _, err := ctx.OnDispose("tools.web searcher", func() error { s.close(); return nil }); err != nil {
				s.close()
				return err
			}
			if err := svc.Register(ctx, s.tool()); err != nil {
				return err
			}
		}
		return nil
	}, tools.Key)

// fetchSchema is closed like every built-in tool's.
var fetchSchema = json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","minLength":1,"maxLength":2048,"description":"the http or https URL to GET"}},"required":["url"],"additionalProperties":false}`)

func (f *fetcher) tool() tools.Tool {
	return tools.Tool{
		Name: FetchTool,
		Description: fmt.Sprintf("Fetches a URL with GET and returns its content as text: an HTML page as Markdown (links made absolute), "+
			"plain text, JSON or XML as is. Binary content (images, PDFs, archives) is refused. Limits: %s per fetch, %d bytes of body read, "+
			"%d bytes of text returned (the rest is cut), %d redirects. Hosts are checked by the egress policy (%s); "+
			"local addresses (loopback, private, link-local) are refused unless the policy names them.",
			f.cfg.Timeout, f.cfg.MaxBodyBytes, f.cfg.MaxOutputBytes, f.cfg.MaxRedirects, f.policy),
		Parameters: fetchSchema,
		// A fetch changes nothing here: it may run beside any other
		// parallel-safe call.
		ParallelSafe: true,
		ReadOnly:     true,
		// The URL is the model's choice and can carry what it read
		// anywhere the policy allows: a person approves, unless a mode or
		// a rule decides.
		Approval: tools.Ask,
		Execute:  f.execute,
	}
}

func (f *fetcher) execute(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
	var args struct {
		URL string `json:"url"`
	}
	if err := decodeArgs(c.Arguments, &args); err != nil {
		return tools.Result{}, err
	}
	p, err := f.Fetch(ctx, args.URL)
	if err != nil {
		if ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		var e *errs.Error
		if errors.As(err, &e) && e.Code == egress.Refused && f.onRefusal != nil {
			f.onRefusal(c.AgentID, args.URL, e)
		}
		msg := "web_fetch: " + errMessage(err)
		if e != nil && e.Code == HTTPStatus && p.Text != "" {
			msg += "\n\n" + clip(p.Text, 2000)
		}
		return tools.Result{Content: msg, IsError: true}, nil
	}
	return tools.Result{Content: f.render(args.URL, p)}, nil
}

// render is what the model reads: a few header lines, then the text, cut
// at max_output_bytes with a note.
func (f *fetcher) render(asked string, p Page) string {
	var b strings.Builder
	b.WriteString("URL: " + p.URL)
	if p.Redirects > 0 {
		fmt.Fprintf(&b, " (after %d redirect(s) from %s)", p.Redirects, asked)
	}
	b.WriteString("\nContent-Type: " + p.ContentType + "\n")
	if p.Title != "" {
		b.WriteString("Title: " + p.Title + "\n")
	}
	b.WriteString("\n")
	text := p.Text
	cut := 0
	if len(text) > f.cfg.MaxOutputBytes {
		cut = len(text)
		text = clip(text, f.cfg.MaxOutputBytes)
		text = strings.TrimSuffix(text, "…")
		cut -= len(text)
	}
	b.WriteString(text)
	if cut > 0 {
		fmt.Fprintf(&b, "\n\n[... %d more bytes of text cut here: web_fetch returns at most %d bytes]", cut, f.cfg.MaxOutputBytes)
	}
	if p.Truncated {
		fmt.Fprintf(&b, "\n\n[the body is longer than %d bytes; only that much was read]", f.cfg.MaxBodyBytes)
	}
	return b.String()
}

// searcher is web_search for one plugin instance.
type searcher struct {
	cfg      SearchConfig
	def      ProviderDef
	provider Provider
	client   *http.Client
}

// newSearcher builds the configured provider with the key from getenv.
// A missing key is an error naming the variable, never the value.
func newSearcher(cfg SearchConfig, getenv func(string) string) (*searcher, error) {
	def, ok := lookupProvider(cfg.Provider)
	if !ok {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("tools.web: search.provider %q is not one of %s", cfg.Provider, strings.Join(ProviderNames(), ", ")))
	}
	env := cfg.APIKeyEnv
	if env == "" {
		env = def.KeyEnv
	}
	key := strings.TrimSpace(getenv(env))
	if key == "" {
		return nil, errs.New(KeyMissing, fmt.Sprintf("tools.web: web_search with provider %s needs an API key in the environment variable %s, which is empty or unset; set it, name another variable with search.api_key_env, or leave web_search out of tools", def.Name, env))
	}
	base := cfg.BaseURL
	if base == "" {
		base = def.BaseURL
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The timeout is the call's context's (see execute), which ends the
	// request and its connection together.
	client := &http.Client{Transport: tr}
	return &searcher{cfg: cfg, def: def, client: client,
		provider: def.New(ProviderConfig{BaseURL: base, Key: key, Client: client})}, nil
}

func (s *searcher) close() { s.client.CloseIdleConnections() }

func (s *searcher) tool() tools.Tool {
	schema := fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":400,"description":"the search terms"},"count":{"type":"integer","minimum":1,"maximum":%d,"description":"how many results, default %d"}},"required":["query"],"additionalProperties":false}`,
		s.cfg.MaxResults, s.defaultCount())
	return tools.Tool{
		Name: SearchTool,
		Description: fmt.Sprintf("Searches the web (%s) and returns a numbered list of results: title, URL and a snippet each. "+
			"At most %d results per call; fetch a result's page with web_fetch to read it.", s.def.Name, s.cfg.MaxResults),
		Parameters:   json.RawMessage(schema),
		ParallelSafe: true,
		ReadOnly:     true,
		Execute:      s.execute,
	}
}

func (s *searcher) defaultCount() int { return min(5, s.cfg.MaxResults) }

func (s *searcher) execute(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
	var args struct {
		Query string `json:"query"`
		Count int    `json:"count"`
	}
	if err := decodeArgs(c.Arguments, &args); err != nil {
		return tools.Result{}, err
	}
	q := Query{Text: strings.TrimSpace(args.Query), Count: args.Count}
	if q.Count == 0 {
		q.Count = s.defaultCount()
	}
	if q.Text == "" || q.Count < 1 || q.Count > s.cfg.MaxResults {
		return tools.Result{Content: fmt.Sprintf("web_search: give a non-empty query and a count from 1 to %d", s.cfg.MaxResults), IsError: true}, nil
	}
	sctx, cancel := stdctx.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	hits, err := s.provider.Search(sctx, q)
	if err != nil {
		if ctx.Err() != nil {
			return tools.Result{}, ctx.Err()
		}
		if errors.Is(sctx.Err(), stdctx.DeadlineExceeded) {
			return tools.Result{Content: fmt.Sprintf("web_search: the %s search API did not answer within %s (tools.web search.timeout)", s.def.Name, s.cfg.Timeout), IsError: true}, nil
		}
		return tools.Result{Content: "web_search: " + err.Error(), IsError: true}, nil
	}
	// An API may return more than asked for: the count is a bound.
	if len(hits) > q.Count {
		hits = hits[:q.Count]
	}
	return tools.Result{Content: renderHits(q.Text, hits)}, nil
}

// renderHits lists the results, one block each.
func renderHits(query string, hits []Hit) string {
	if len(hits) == 0 {
		return fmt.Sprintf("no results for %q", query)
	}
	var b strings.Builder
	for i, h := range hits {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%d. %s\n   %s\n", i+1, clip(plainSnippet(h.Title), 300), h.URL)
		if s := plainSnippet(h.Snippet); s != "" {
			fmt.Fprintf(&b, "   %s\n", clip(s, 600))
		}
	}
	return b.String()
}

// decodeArgs decodes a call's arguments strictly (the schema was checked
// already; this is the tool's own guard).
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("the arguments are not the JSON object the schema describes: %v", err)
	}
	return nil
}

// errMessage is an error's message without its code, for the model.
func errMessage(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
