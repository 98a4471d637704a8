package reviewer_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/policy/reviewer"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var bash = &tools.Tool{Name: "bash", Approval: tools.Ask}

func call(cmd string) tools.Approval {
	args, _ := json.Marshal(map[string]string{"command": cmd})
	return tools.Approval{Tool: bash, Call: tools.Call{AgentID: "main", ID: "c1", Name: "bash", Arguments: args, Workspace: "/w",
		Sources: []llm.Provenance{{Principal: llm.Principal{Kind: "token", ID: "bob"}, Entry: "serve"}}}}
}

func approve(t *testing.T, e *testkit.Env, a tools.Approval) tools.Verdict {
	t.Helper()
	v, err := tools.EventApprove.Dispatch(stdctx.Background(), e.Root, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestModelReviewer: the reviewer model's verdict decides, its reason
// recorded in the verdict; prose around the JSON is fine; an answer that
// is no verdict, or a model error, denies.
func TestModelReviewer(t *testing.T) {
	for _, c := range []struct {
		reply    scripted.Reply
		decision tools.Decision
		reason   string
	}{
		{scripted.Reply{Text: `{"verdict": "deny", "reason": "deletes the home directory"}`}, tools.Deny, "reviewer/deny: deletes the home directory"},
		{scripted.Reply{Text: "Looks fine.\n```json\n{\"verdict\": \"allow\", \"reason\": \"read only\"}\n```"}, tools.Allow, "reviewer/allow: read only"},
		{scripted.Reply{Text: `{"verdict": "ask", "reason": "pushes to main"}`}, tools.Ask, "reviewer/ask: pushes to main"},
		{scripted.Reply{Text: `I think it is fine`}, tools.Deny, "reviewer/failed: the reviewer failed (its answer holds no JSON object"},
		{scripted.Reply{Text: `{"verdict": "maybe"}`}, tools.Deny, `its verdict is "maybe"`},
		{scripted.Reply{Finish: "error", Error: "overloaded"}, tools.Deny, "overloaded"},
	} {
		e := testkit.New(t)
		e.Apply(scripted.Plugin, scripted.Config{Name: "judge", Replies: []scripted.Reply{c.reply}})
		e.Apply(reviewer.Plugin, reviewer.Config{Provider: "judge", Tools: []string{"ba*"}})
		v := approve(t, e, call("rm -rf ~"))
		if v.Decision != c.decision || !strings.Contains(v.Reason, c.reason) || v.Source != reviewer.ID {
			t.Errorf("reply %+v: verdict %+v, want %s …%s…", c.reply, v, c.decision, c.reason)
		}
	}
	// A tool the config does not cover is not reviewed.
	e := testkit.New(t)
	e.Apply(scripted.Plugin, scripted.Config{Name: "judge", Replies: []scripted.Reply{{Text: `{"verdict": "deny"}`}}})
	e.Apply(reviewer.Plugin, reviewer.Config{Provider: "judge", Tools: []string{"write"}})
	if v := approve(t, e, call("ls")); v.Decision != tools.Ask || v.Source != "" {
		t.Fatalf("an uncovered tool: %+v", v)
	}
}

// script writes an executable reviewer script.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "review.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCommandReviewer runs real reviewer processes: one that reads the
// call on stdin and judges it, one that hangs past the timeout (denied,
// and its process group killed in time), one that fails, one that answers
// nonsense.
func TestCommandReviewer(t *testing.T) {
	judge := script(t, `in=$(cat)
case "$in" in
  *'rm -rf'*) echo '{"verdict":"deny","reason":"destructive, asked by '"$(echo "$in" | sed 's/.*"id":"\([a-z]*\)".*/\1/')"'"}' ;;
  *) echo '{"verdict":"allow","reason":"harmless"}' ;;
esac
`)
	e := testkit.New(t)
	e.Apply(reviewer.Plugin, reviewer.Config{Command: []string{judge}})
	if v := approve(t, e, call("rm -rf /")); v.Decision != tools.Deny || v.Reason != "reviewer/deny: destructive, asked by bob" {
		t.Fatalf("judge on rm: %+v", v)
	}
	if v := approve(t, e, call("ls")); v.Decision != tools.Allow || v.Reason != "reviewer/allow: harmless" {
		t.Fatalf("judge on ls: %+v", v)
	}

	for name, c := range map[string]struct {
		body   string
		reason string
	}{
		"hangs":    {"sleep 30 &\nsleep 30\n", "reviewer/timeout: the reviewer did not answer within 300ms"},
		"fails":    {"echo broken >&2\nexit 3\n", "exited with status 3: broken"},
		"nonsense": {"echo yes\n", "holds no JSON object"},
	} {
		e := testkit.New(t)
		e.Apply(reviewer.Plugin, reviewer.Config{Command: []string{script(t, c.body)}, Timeout: 300 * time.Millisecond})
		start := time.Now()
		v := approve(t, e, call("ls"))
		if v.Decision != tools.Deny || !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%s: %+v, want deny …%s…", name, v, c.reason)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: the review took %s", name, took)
		}
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []reviewer.Config{{}, {Provider: "x", Command: []string{"y"}}, {Command: []string{""}}, {Provider: "x", Tools: []string{"["}}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
