package web

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// The shipped providers. Each follows its API's documented request and
// response; only the fields web_search shows are decoded.
func init() {
	RegisterProvider(ProviderDef{Name: "brave", BaseURL: "https://api.search.brave.com", KeyEnv: "BRAVE_API_KEY", MaxResults: 20,
		New: func(c ProviderConfig) Provider { return brave{c} }})
	RegisterProvider(ProviderDef{Name: "tavily", BaseURL: "https://api.tavily.com", KeyEnv: "TAVILY_API_KEY", MaxResults: 20,
		New: func(c ProviderConfig) Provider { return tavily{c} }})
}

// maxAnswerBytes caps a provider's answer: a page of 20 results is a few
// tens of KiB.
const maxAnswerBytes = 4 << 20

// brave is the Brave Search API: GET /res/v1/web/search?q=…&count=…, the
// key in X-Subscription-Token, results in web.results[] with title, url
// and description (which marks the query's words with <strong>).
type brave struct{ c ProviderConfig }

func (b brave) Search(ctx stdctx.Context, q Query) ([]Hit, error) {
	u := strings.TrimRight(b.c.BaseURL, "/") + "/res/v1/web/search?" + url.Values{"q": {q.Text}, "count": {strconv.Itoa(q.Count)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", b.c.Key)
	var out struct {
		Web struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := call(b.c, "brave", req, &out); err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, len(out.Web.Results))
	for _, r := range out.Web.Results {
		hits = append(hits, Hit{Title: r.Title, URL: r.URL, Snippet: r.Description})
	}
	return hits, nil
}

// tavily is the Tavily Search API: POST /search with {query, max_results},
// the key as a bearer token, results in results[] with title, url and
// content.
type tavily struct{ c ProviderConfig }

func (t tavily) Search(ctx stdctx.Context, q Query) ([]Hit, error) {
	body, _ := json.Marshal(map[string]any{"query": q.Text, "max_results": q.Count})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(t.c.BaseURL, "/")+"/search", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.c.Key)
	var out struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := call(t.c, "tavily", req, &out); err != nil {
		return nil, err
	}
	hits := make([]Hit, 0, len(out.Results))
	for _, r := range out.Results {
		hits = append(hits, Hit{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return hits, nil
}

// call sends req and decodes a 200 answer into out. Its errors name the
// provider and the status, quote the start of the answer's body, and
// never carry the key: the body is scrubbed of it, and the request (which
// holds it in a header) is not printed.
func call(c ProviderConfig, name string, req *http.Request, out any) error {
	resp, err := c.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("the %s search API could not be reached: %s", name, scrub(err.Error(), c.Key))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("the %s search API's answer broke off: %s", name, scrub(err.Error(), c.Key))
	}
	if len(data) > maxAnswerBytes {
		return fmt.Errorf("the %s search API's answer is over %d bytes; web_search does not read it", name, maxAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			hint = " (the API key was refused: check the key in the variable search.api_key_env names)"
		case http.StatusTooManyRequests:
			hint = " (rate limited: wait before searching again)"
		}
		return fmt.Errorf("the %s search API answered %s%s: %s", name, resp.Status, hint, clip(scrub(string(data), c.Key), 300))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the %s search API's answer is not the JSON it documents: %v", name, err)
	}
	return nil
}

// scrub removes the key from text that may be shown: an API that echoes
// the key it refused must not hand it to the model.
func scrub(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[key]")
}

var tags = lazyregexp.New(`<[^>]*>`)

// plainSnippet turns a snippet's inline HTML (Brave marks matches with
// <strong>) and entities into text on one line.
func plainSnippet(s string) string {
	s = html.UnescapeString(tags.ReplaceAllString(s, ""))
	return strings.Join(strings.Fields(s), " ")
}

// clip cuts s to n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
