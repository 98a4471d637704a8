package serve_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/session"
)

const (
	aliceToken = "alice-secret-0123456789" // tenant acme
	bobToken   = "bob-secret-0123456789"   // tenant globex
	carlToken  = "carl-secret-0123456789"  // tenant acme too
)

var tenantTokens = []serve.Token{
	{Name: "alice", Secret: aliceToken, Tenant: "acme"},
	{Name: "bob", Secret: bobToken, Tenant: "globex"},
	{Name: "carl", Secret: carlToken, Tenant: "acme"},
}

// as sends a request with token's bearer header.
func (e *env) as(token, method, path string, body any) response {
	e.t.Helper()
	return e.call(method, path, body, "Authorization", "Bearer "+token, "Content-Type", "application/json")
}

// openAs opens a session as token's caller and returns its id.
func (e *env) openAs(token string, body any) string {
	e.t.Helper()
	r := e.as(token, "POST", "/v1/sessions", body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("open: %d %s", r.status, r.body)
	}
	var s sessionOut
	r.json(e.t, &s)
	return s.ID
}

// listAs is the ids GET path lists to token's caller.
func (e *env) listAs(token, path string) (ids []string, next string) {
	e.t.Helper()
	var out struct {
		Sessions []struct{ ID, Tenant string }
		Next     string
	}
	e.as(token, "GET", path, nil).json(e.t, &out)
	for _, s := range out.Sessions {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids, out.Next
}

// Every operation of the API document that names a session answers
// another tenant's caller exactly as it answers for a session that does
// not exist — same status, same body but for the id — and changes nothing:
// a route added without the tenant check fails here.
func TestEveryRouteKeepsTenantsApart(t *testing.T) {
	e := newEnv(t, envOpts{tokens: tenantTokens})
	id := e.openAs(aliceToken, map[string]any{})
	if r := e.as(aliceToken, "POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r-1", "content": "hello"}); r.status != http.StatusAccepted {
		t.Fatalf("alice's prompt: %d %s", r.status, r.body)
	}
	e.waitEvents(id, "the turn's end", turnsEnded(1))
	if r := e.as(aliceToken, "POST", "/v1/sessions/"+id+"/title", map[string]string{"title": "alice's"}); r.status != http.StatusOK {
		t.Fatalf("alice's title: %d %s", r.status, r.body)
	}
	before := len(e.events(id))
	// An id as long as hers, that names nothing.
	missing := id[:len(id)-1] + "0"
	if missing == id {
		missing = id[:len(id)-1] + "1"
	}

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(serve.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	fill := func(path, id string) string {
		return strings.NewReplacer("{id}", id, "{qid}", "1", "{job}", "j-1", "{ref}", "sha256:"+strings.Repeat("0", 64)).Replace(path)
	}
	body := `{"content":"sneaky","title":"sneaky","objective":"sneaky","to_turn":0}`
	checked := 0
	for path, ops := range doc.Paths {
		if !strings.Contains(path, "{id}") {
			continue
		}
		for method := range ops {
			method = strings.ToUpper(method)
			if method != "GET" && method != "POST" && method != "DELETE" {
				continue
			}
			checked++
			for _, token := range []string{bobToken} {
				foreign := e.as(token, method, fill(path, id), body)
				absent := e.as(token, method, fill(path, missing), body)
				if foreign.status != http.StatusNotFound || foreign.err(t).Code != "SESSION_NOT_FOUND" {
					t.Errorf("%s %s, another tenant's session: %d %s", method, path, foreign.status, foreign.body)
					continue
				}
				if a, b := strings.ReplaceAll(string(foreign.body), id, "ID"), strings.ReplaceAll(string(absent.body), missing, "ID"); absent.status != foreign.status || a != b {
					t.Errorf("%s %s tells another tenant's session from a missing one:\n%d %s\n%d %s", method, path, foreign.status, a, absent.status, b)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d operations on a session checked; the document lists more", checked)
	}

	// Nothing happened to hers.
	var got sessionOut
	r := e.as(aliceToken, "GET", "/v1/sessions/"+id, nil)
	r.json(t, &got)
	if r.status != http.StatusOK || !got.Open || got.State != string(session.StateOpen) {
		t.Fatalf("alice's session after bob's calls: %d %s", r.status, r.body)
	}
	evs := e.events(id)
	if len(evs) != before {
		t.Fatalf("bob's calls changed the log: %d events, %d before", len(evs), before)
	}
	// Carl shares alice's tenant: he sees it.
	if r := e.as(carlToken, "GET", "/v1/sessions/"+id, nil); r.status != http.StatusOK {
		t.Fatalf("carl, of alice's tenant: %d %s", r.status, r.body)
	}
	// Bob's lists and titles leave it out; the operator's have it.
	if ids, _ := e.listAs(bobToken, "/v1/sessions"); len(ids) != 0 {
		t.Fatalf("bob lists %v", ids)
	}
	var titles struct{ Titles map[string]string }
	e.as(bobToken, "GET", "/v1/titles", nil).json(t, &titles)
	if len(titles.Titles) != 0 {
		t.Fatalf("bob sees the titles %v", titles.Titles)
	}
	e.call("GET", "/v1/titles", nil).json(t, &titles)
	if titles.Titles[id] != "alice's" {
		t.Fatalf("the operator sees the titles %v", titles.Titles)
	}
}

// Lists and their pages show a tenant its own sessions only, and a page's
// cursor never names another tenant's; an operator lists them all.
func TestListsAndPagesAreFilteredByTenant(t *testing.T) {
	e := newEnv(t, envOpts{tokens: tenantTokens})
	mine := map[string][]string{}
	// Newest first the list is bob, alice, bob, alice, alice, operator:
	// two a page, bob's second page ends on alice's session with more to
	// come, where the store's cursor would name hers.
	for i, token := range []string{"", aliceToken, aliceToken, bobToken, aliceToken, bobToken} {
		var id string
		if token == "" {
			id = e.open(map[string]any{})
		} else {
			id = e.openAs(token, map[string]any{})
		}
		mine[token] = append(mine[token], id)
		e.send(id, "r-"+itoa(int64(i)), "hi")
		e.waitEvents(id, "the turn's end", turnsEnded(1))
	}
	for _, ids := range mine {
		slices.Sort(ids)
	}
	for _, token := range []string{aliceToken, bobToken} {
		if ids, _ := e.listAs(token, "/v1/sessions"); !slices.Equal(ids, mine[token]) {
			t.Errorf("listed %v, want %v", ids, mine[token])
		}
		// Page by page: with two a page, the store's pages end on
		// another tenant's session now and then.
		for _, limit := range []string{"1", "2"} {
			var paged []string
			cursor := ""
			for range 10 {
				ids, next := e.listAs(token, "/v1/sessions?limit="+limit+"&cursor="+cursor)
				paged = append(paged, ids...)
				if next == "" {
					break
				}
				_, cid, err := session.ParseCursor(next)
				if err != nil || !slices.Contains(mine[token], cid) {
					t.Fatalf("a page's cursor names %q (%v), not one of %v", cid, err, mine[token])
				}
				cursor = next
			}
			slices.Sort(paged)
			if !slices.Equal(paged, mine[token]) {
				t.Errorf("paged %s at a time: %v, want %v", limit, paged, mine[token])
			}
		}
	}
	if ids, _ := e.listAs(e.token, "/v1/sessions"); len(ids) != 6 {
		t.Errorf("the operator lists %v", ids)
	}
	if ids, _ := e.listAs(e.token, "/v1/sessions?limit=0"); len(ids) != 6 {
		t.Errorf("the operator's page lists %v", ids)
	}
}

// A tenant asking for a session id that is taken — by its own tenant or
// by another — gets the same 409, which names no one; a free id is its.
func TestCreatingATakenIDTellsNothing(t *testing.T) {
	e := newEnv(t, envOpts{tokens: tenantTokens})
	alices := e.openAs(aliceToken, map[string]any{"session_id": "shared-name"})
	operators := e.open(map[string]any{"session_id": "ops-name"})
	var bodies []string
	for _, c := range []struct{ token, id string }{{bobToken, alices}, {aliceToken, alices}, {bobToken, operators}} {
		r := e.as(c.token, "POST", "/v1/sessions", map[string]any{"session_id": c.id})
		if r.status != http.StatusConflict || r.err(t).Code != string(session.SessionExists) {
			t.Fatalf("%s taken: %d %s", c.id, r.status, r.body)
		}
		b := strings.ReplaceAll(string(r.body), c.id, "ID")
		if strings.Contains(b, "acme") || strings.Contains(b, "alice") {
			t.Fatalf("the refusal names its owner: %s", b)
		}
		bodies = append(bodies, b)
	}
	if bodies[0] != bodies[1] || bodies[0] != bodies[2] {
		t.Fatalf("the refusals differ by owner:\n%s", strings.Join(bodies, "\n"))
	}
	if id := e.openAs(bobToken, map[string]any{"session_id": "bobs-name"}); id != "bobs-name" {
		t.Fatalf("bob's own id: %q", id)
	}
}

// A session's tenant is stored with it: after a restart another tenant
// still gets 404, the owner's tenant sees it, resumes it and it stays the
// tenant's, even when an operator resumed it.
func TestATenantSurvivesARestart(t *testing.T) {
	store := t.TempDir()
	e := newEnv(t, envOpts{tokens: tenantTokens, store: store})
	id := e.openAs(aliceToken, map[string]any{})
	e.send(id, "r-1", "hi")
	e.waitEvents(id, "the turn's end", turnsEnded(1))
	e.close()

	e = newEnv(t, envOpts{tokens: tenantTokens, store: store})
	if r := e.as(bobToken, "GET", "/v1/sessions/"+id, nil); r.status != http.StatusNotFound {
		t.Fatalf("bob after the restart: %d %s", r.status, r.body)
	}
	var got struct{ Tenant string }
	if r := e.as(aliceToken, "GET", "/v1/sessions/"+id, nil); r.status != http.StatusOK {
		t.Fatalf("alice after the restart: %d %s", r.status, r.body)
	} else if r.json(t, &got); got.Tenant != "acme" {
		t.Fatalf("the session's tenant after the restart: %q", got.Tenant)
	}
	// The operator resumes it; it stays acme's.
	if r := e.call("POST", "/v1/sessions/"+id+"/resume", map[string]any{}); r.status != http.StatusOK {
		t.Fatalf("the operator's resume: %d %s", r.status, r.body)
	}
	if r := e.as(bobToken, "POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r-bob", "content": "mine now"}); r.status != http.StatusNotFound {
		t.Fatalf("bob, on the resumed session: %d %s", r.status, r.body)
	}
	if r := e.as(aliceToken, "POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r-2", "content": "again"}); r.status != http.StatusAccepted {
		t.Fatalf("alice, on the resumed session: %d %s", r.status, r.body)
	}
	e.waitEvents(id, "the second turn's end", turnsEnded(2))
	if ids, _ := e.listAs(aliceToken, "/v1/sessions"); !slices.Equal(ids, []string{id}) {
		t.Fatalf("alice lists %v", ids)
	}
}

// /metrics counts every tenant's work: a tenant's caller is told there is
// no such route; an operator reads it.
func TestMetricsAreTheOperatorsOnly(t *testing.T) {
	e := newEnv(t, envOpts{tokens: tenantTokens, metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("dsh_sessions 3\n"))
	})})
	get := func(token string) *http.Response {
		req, _ := http.NewRequest("GET", e.ts.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(aliceToken); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a tenant's /metrics: %d", resp.StatusCode)
	}
	if resp := get(e.token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the operator's /metrics: %d", resp.StatusCode)
	}
}

// When some principals have tenants and others not, the server says at
// start which are operators; with every principal in a tenant it says
// that instead; a token's tenant that cannot be stored is refused.
func TestOperatorsAreStatedAtStart(t *testing.T) {
	e := newEnv(t, envOpts{tokens: tenantTokens})
	out := e.log.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "operators="+serve.DefaultTokenName) {
		t.Fatalf("no warning names the operators:\n%s", out)
	}
	plain := newEnv(t, envOpts{tokens: []serve.Token{{Name: "bob", Secret: bobToken}}})
	if strings.Contains(plain.log.String(), "tenant") {
		t.Fatalf("a server without tenants talks of them:\n%s", plain.log.String())
	}
	cfg := e.h.Config()
	_, err := serve.New(serve.Options{Sessions: e.h.Sessions(), Config: cfg, Tokens: []serve.Token{{Name: "x", Secret: "s", Tenant: "a\nb"}}})
	if err == nil || !strings.Contains(err.Error(), `token "x"`) {
		t.Fatalf("a tenant with a newline: %v", err)
	}
}
