package main

import (
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// policyConfig is a config with a policy.cel of two rules (see
// docs/policy.md): webhooks may not ask for deploys, and a write outside
// src/ is asked about unless its turn comes from the owner, alice. Two
// named tokens (alice, bob) and a signed webhook (ci) are its callers; the
// scripted model writes docs/notes.md on every first step.
func policyConfig(t *testing.T, workspace, store string) string {
	t.Helper()
	cfg := `plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: write, arguments: '{"path": "docs/notes.md", "content": "hello"}'}]
        - text: written
  - use: tools.files
  - use: session.jsonl
    config: {dir: ` + store + `}
  - use: policy.cel
    config:
      params:
        owner: alice
      admission:
        - name: no-webhook-deploys
          when: source.entry == "webhook" && request.content.contains("deploy")
          action: refuse
          message: webhooks may not ask for deploys
      approval:
        - name: owner-writes
          when: call.tool in ["write", "edit"] && source.principal.id == params.owner
          action: allow
        - name: writes-outside-src
          when: call.tool in ["write", "edit"] && !call.path.startsWith("src/")
          action: ask
          message_expression: source.principal.id + " writes " + call.path + " outside src/"
agents:
  - id: main
    provider: scripted
    workspace: ` + workspace + `
serve:
  tokens:
    - {name: alice, env: ALICE_TOKEN}
    - {name: bob, env: BOB_TOKEN}
  webhooks:
    ci:
      secret_env: CI_HOOK_SECRET
      prompt: "{{.Body.text}}"
log:
  level: warn
`
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPolicyCELThroughServe runs dsh serve with a CEL policy: a webhook's
// prompt is refused by the admission rule (its reason and the rule's
// message come back to the sender), a web user's write outside src/ is
// asked about with the rule's message, and the owner's same write runs
// without a question.
func TestPolicyCELThroughServe(t *testing.T) {
	workspace, store := t.TempDir(), t.TempDir()
	cfg := policyConfig(t, workspace, store)
	p := startServe(t, cfg, "ALICE_TOKEN=alice-0123456789abcdef", "BOB_TOKEN=bob-0123456789abcdef", "CI_HOOK_SECRET=s3cret")

	call := func(token, method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}

	// The webhook asks for a deploy: refused at admission.
	body := `{"text":"please deploy to production"}`
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(body))
	req, _ := http.NewRequest("POST", p.base+"/hooks/ci", strings.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var refusal struct{ Code, Reason, Message string }
	json.Unmarshal(out, &refusal)
	if resp.StatusCode/100 != 4 || refusal.Reason != "policy/no-webhook-deploys" || !strings.Contains(refusal.Message, "webhooks may not ask for deploys") {
		t.Fatalf("the webhook's deploy prompt got %d %s, want a refusal by policy/no-webhook-deploys\n%s", resp.StatusCode, out, p.log.String())
	}

	// bob writes docs/notes.md: asked, with the rule's message.
	bob, alice := "bob-0123456789abcdef", "alice-0123456789abcdef"
	if code, out := call(bob, "POST", "/v1/sessions", `{"session_id":"bob-1"}`); code != 201 {
		t.Fatalf("open: %d %s", code, out)
	}
	if code, out := call(bob, "POST", "/v1/sessions/bob-1/messages", `{"request_id":"b1","content":"take notes"}`); code != 202 {
		t.Fatalf("message: %d %s", code, out)
	}
	type question struct {
		ID      int64 `json:"id"`
		Request struct {
			Tool   string `json:"tool"`
			Reason string `json:"reason"`
		} `json:"request"`
	}
	var pending struct {
		Approvals []question `json:"approvals"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(pending.Approvals) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("bob's write was never asked about\n%s", p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
		_, out := call(bob, "GET", "/v1/sessions/bob-1/approvals", "")
		json.Unmarshal(out, &pending)
	}
	q := pending.Approvals[0]
	if q.Request.Tool != "write" || !strings.Contains(q.Request.Reason, "policy/writes-outside-src: bob writes docs/notes.md outside src/") {
		t.Fatalf("question %+v", q)
	}
	if code, out := call(bob, "POST", "/v1/sessions/bob-1/approvals/"+itoa(q.ID), `{"choice":"deny","reason":"not now"}`); code != 200 {
		t.Fatalf("answer: %d %s", code, out)
	}
	waitLog(t, filepath.Join(store, "bob-1.jsonl"), `"type":"turn/end"`)
	if _, err := os.Stat(filepath.Join(workspace, "docs", "notes.md")); err == nil {
		t.Fatal("bob's denied write ran")
	}

	// alice, the owner, writes the same file: no question, it runs.
	if code, out := call(alice, "POST", "/v1/sessions", `{"session_id":"alice-1"}`); code != 201 {
		t.Fatalf("open: %d %s", code, out)
	}
	if code, out := call(alice, "POST", "/v1/sessions/alice-1/messages", `{"request_id":"a1","content":"take notes"}`); code != 202 {
		t.Fatalf("message: %d %s", code, out)
	}
	waitLog(t, filepath.Join(store, "alice-1.jsonl"), `"type":"turn/end"`)
	if b, err := os.ReadFile(filepath.Join(workspace, "docs", "notes.md")); err != nil || string(b) != "hello" {
		t.Fatalf("alice's write: %q %v", b, err)
	}
	// The log keeps who asked.
	data, _ := os.ReadFile(filepath.Join(store, "alice-1.jsonl"))
	if !strings.Contains(string(data), `"from":{"principal":{"kind":"token","id":"alice"},"entry":"serve"}`) {
		t.Fatalf("alice's prompt is not recorded with its provenance:\n%s", data)
	}
}

func waitLog(t *testing.T, file, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(file)
		if strings.Contains(string(data), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %s:\n%s", file, want, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestPolicyTypeErrorAtConfigCheck: a rule naming a field the call does
// not have is a config check error at the rule's line.
func TestPolicyTypeErrorAtConfigCheck(t *testing.T) {
	cfg := writeConfig(t, "        - text: hi\n", `  - use: policy.cel
    config:
      approval:
        - name: fine
          when: call.tool == "bash"
          action: ask
        - name: typo
          when: call.tool == "write" && call.file.startsWith("src/")
          action: deny
`)
	o := runDsh(t, "", "config", "check", "--config", cfg)
	// writeConfig's plugins come first: the typo's when: is line 14.
	want := cfg + ":14: plugins[2].config.approval[1].when: rule \"typo\": when: ERROR: <input>:1:29: undefined field 'file'"
	if o.code == 0 || !strings.Contains(o.stdout+o.stderr, want) {
		t.Fatalf("exit %d, want the problem\n%s\ngot\n%s%s", o.code, want, o.stdout, o.stderr)
	}
}

// TestCLIPromptsAreTheOSUsers: dsh run's prompt names the OS user through
// the cli entry point; a rule refusing exactly that principal refuses it
// (exit 3, the rule's message on stderr).
func TestCLIPromptsAreTheOSUsers(t *testing.T) {
	me := osUser()
	if me.ID == "" {
		t.Fatal("no OS user")
	}
	cfg := writeConfig(t, "        - text: hi\n", `  - use: policy.cel
    config:
      params: {me: "`+me.ID+`"}
      admission:
        - name: not-me
          when: source.entry == "cli" && source.principal.kind == "user" && source.principal.id == params.me
          action: refuse
          message_expression: '"no prompts from " + source.principal.id'
`)
	o := runDsh(t, "", "run", "--config", cfg, "-p", "hello")
	if o.code != exitRefused || !strings.Contains(o.stderr, "no prompts from "+me.ID) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
}

// TestPolicyReloadKeepsTheOldPolicyOnATypeError: dsh's config watch takes
// an edited policy.cel rule; an edit with a type error is refused and
// logged, and the running rule keeps refusing.
func TestPolicyReloadKeepsTheOldPolicyOnATypeError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	rule := func(word, expr string) string {
		return "plugins:\n  - use: llm.scripted\n  - id: policy\n    use: policy.cel\n    config:\n      admission:\n" +
			"        - {name: no-" + word + ", when: '" + expr + "', action: refuse, message: no " + word + "}\n" +
			"agents:\n  - id: main\n    provider: scripted\n"
	}
	os.WriteFile(path, []byte(rule("alpha", `request.content.contains("alpha")`)), 0o644)
	opts := config.LoadOptions{Path: path, Environ: []string{}}
	cfg, err := config.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	h, err := host.Start(cfg, host.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	stop := watch(h, opts, 20*time.Millisecond)
	defer stop()
	ctx := stdctx.Background()
	in, err := h.Sessions().Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	refusedBy := func(text string) string {
		n++
		_, err := h.Sessions().Prompt(ctx, in.ID, sessions.PromptRequest{RequestID: "r" + itoa(int64(n)), Content: text, Source: cliSource})
		r, _ := sessions.RejectionOf(err)
		return r.Reason
	}
	if got := refusedBy("alpha"); got != "policy/no-alpha" {
		t.Fatalf("alpha: refused by %q", got)
	}

	replaceFile(t, path, rule("beta", `request.contnt.contains("beta")`))
	eventually(t, "the broken policy was reported", func() bool {
		return strings.Contains(logs.String(), "keeping the running config") && strings.Contains(logs.String(), "undefined field 'contnt'")
	})
	if got := refusedBy("alpha"); got != "policy/no-alpha" {
		t.Fatalf("after a broken edit, alpha was refused by %q", got)
	}

	replaceFile(t, path, rule("beta", `request.content.contains("beta")`))
	eventually(t, "the new policy took over", func() bool { return refusedBy("beta") == "policy/no-beta" })
	if got := refusedBy("alpha"); got != "" {
		t.Fatalf("alpha still refused by %q", got)
	}
}
