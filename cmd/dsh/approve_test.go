package main

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/approval"
)

var bashRm = approval.Request{AgentID: "main", CallID: "c1", Tool: "bash", Arguments: json.RawMessage(`{"command":"git status && rm -rf ~"}`),
	Summary: "git status && rm -rf ~", Reason: "rm is not allowed without asking", Pattern: "rm"}

var editReq = approval.Request{AgentID: "main", CallID: "c2", Tool: "edit",
	Arguments: json.RawMessage(`{"path":"notes.txt","old":"` + strings.Repeat("x", 100) + `","new":"y"}`)}

func TestParseAnswer(t *testing.T) {
	cases := []struct {
		line      string
		choice    approval.Choice
		reason    string
		askReason bool
		ok        bool
	}{
		{"y", approval.AllowOnce, "", false, true},
		{" YES ", approval.AllowOnce, "", false, true},
		{"a", approval.AllowSession, "", false, true},
		{"always", approval.AllowSession, "", false, true},
		{"n", approval.Deny, "", true, true},
		{"no", approval.Deny, "", true, true},
		{"n  not on main, use a branch ", approval.Deny, "not on main, use a branch", false, true},
		{"", "", "", false, false},
		{"y please", "", "", false, false}, // only n takes words after it
		{"maybe", "", "", false, false},
		{"nope", "", "", false, false},
	}
	for _, c := range cases {
		ans, askReason, ok := parseAnswer(c.line)
		if ok != c.ok || (ok && (ans.Choice != c.choice || ans.Reason != c.reason || askReason != c.askReason)) {
			t.Errorf("parseAnswer(%q) = %+v, %v, %v", c.line, ans, askReason, ok)
		}
	}
}

func TestQuestionShowsTheCallShort(t *testing.T) {
	q := question(bashRm)
	for _, want := range []string{"? bash wants to run: git status && rm -rf ~\n", "(rm is not allowed without asking)", "y allow once", "a allow bash rm for this session", "n deny"} {
		if !strings.Contains(q, want) {
			t.Errorf("question lacks %q:\n%s", want, q)
		}
	}
	q = question(editReq)
	if !strings.Contains(q, `? edit wants to run with new="y" old="xxxx`) || !strings.Contains(q, "…") || strings.Contains(q, strings.Repeat("x", 61)) {
		t.Errorf("arguments must be shown as short key=value pairs:\n%s", q)
	}
	if !strings.Contains(q, "a allow every edit call for this session") {
		t.Errorf("without a pattern, a covers the tool:\n%s", q)
	}
}

func TestHeadlessAnswererAllowsOnlyWhatTheFlagsName(t *testing.T) {
	var events []approvalEvent
	notify := func(e approvalEvent) { events = append(events, e) }
	ask := headlessAnswerer(approvalFlags{allow: []string{"edit"}}, notify)

	ans, err := ask(stdctx.Background(), editReq)
	if err != nil || ans.Choice != approval.AllowOnce {
		t.Fatalf("--allow edit: %+v %v", ans, err)
	}
	ans, err = ask(stdctx.Background(), bashRm)
	if err != nil || ans.Choice != approval.Deny || !ans.Unattended {
		t.Fatalf("bash without --allow bash: an unattended denial, got %+v %v", ans, err)
	}
	for _, want := range []string{"bash (git status && rm -rf ~)", "nobody to ask", "--allow bash", "--yolo"} {
		if !strings.Contains(ans.Reason, want) {
			t.Errorf("the denial must say %q: %s", want, ans.Reason)
		}
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Type+":"+string(e.Choice)+":"+e.By)
	}
	want := "approval/requested::,approval/answered:allow-once:--allow edit,approval/requested::,approval/answered:deny:unattended"
	if strings.Join(kinds, ",") != want {
		t.Fatalf("events %v, want %s", kinds, want)
	}

	yolo := headlessAnswerer(approvalFlags{yolo: true}, func(approvalEvent) {})
	if ans, _ := yolo(stdctx.Background(), bashRm); ans.Choice != approval.AllowOnce {
		t.Fatalf("--yolo: %+v", ans)
	}
	// A policy's ask is answered by the flags, a hook's (in a preset too)
	// is not.
	for source, flagged := range map[string]bool{"tools.permission:rules[0]": true, "hooks.command:PreToolUse": false, "hooks.command@main:PreToolUse": false, "hooks.commandeer:x": true} {
		req := bashRm
		req.Source = source
		for _, f := range []approvalFlags{{yolo: true}, {allow: []string{"bash"}}} {
			if _, _, ok := f.preanswer(req); ok != flagged {
				t.Errorf("%+v on an ask of %s: answered %v, want %v", f, source, ok, flagged)
			}
		}
	}
}

func TestApprovalEventsAsJSONLines(t *testing.T) {
	var out, diag bytes.Buffer
	notify := approvalNotifier(true, &out, &diag)
	notify(requested(bashRm))
	notify(answered(bashRm, approval.Answer{Choice: approval.Deny, Reason: "no"}, "unattended"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || diag.Len() != 0 {
		t.Fatalf("want two JSON lines on stdout, got %q (stderr %q)", out.String(), diag.String())
	}
	var first, second map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	if first["type"] != "approval/requested" || first["tool"] != "bash" || first["summary"] != "git status && rm -rf ~" || first["call_id"] != "c1" {
		t.Fatalf("requested line %s", lines[0])
	}
	if second["type"] != "approval/answered" || second["choice"] != "deny" || second["by"] != "unattended" || second["reason"] != "no" {
		t.Fatalf("answered line %s", lines[1])
	}
	// As text, a denial tells the operator; a question alone says nothing.
	out.Reset()
	text := approvalNotifier(false, &out, &diag)
	text(requested(bashRm))
	text(answered(bashRm, approval.Answer{Choice: approval.Deny, Reason: "pass --allow bash"}, "unattended"))
	if out.Len() != 0 || diag.String() != "dsh: denied: pass --allow bash\n" {
		t.Fatalf("text: stdout %q stderr %q", out.String(), diag.String())
	}
}

func TestFlagsCheck(t *testing.T) {
	if err := (approvalFlags{allow: []string{"bash", "read_file", "mcp-x"}}).check(); err != nil {
		t.Fatal(err)
	}
	if err := (approvalFlags{allow: []string{"bash:rm"}}).check(); err == nil || !strings.Contains(err.Error(), `--allow "bash:rm"`) {
		t.Fatalf("got %v", err)
	}
}

// TestAskerHandsQuestionsToTheUI: the answerer waits for the UI's reply,
// returns when its ctx ends, and denies once the session closes.
func TestAskerHandsQuestionsToTheUI(t *testing.T) {
	a := newAsker()
	type result struct {
		ans approval.Answer
		err error
	}
	results := make(chan result, 1)
	go func() {
		ans, err := a.answer(stdctx.Background(), bashRm)
		results <- result{ans, err}
	}()
	q := <-a.requests
	if q.req.CallID != "c1" {
		t.Fatalf("question %+v", q.req)
	}
	q.reply <- approval.Answer{Choice: approval.AllowSession}
	if r := <-results; r.err != nil || r.ans.Choice != approval.AllowSession {
		t.Fatalf("answer %+v", r)
	}

	// The turn is cancelled while the question is on screen.
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	go func() {
		ans, err := a.answer(ctx, bashRm)
		results <- result{ans, err}
	}()
	q = <-a.requests
	cancel()
	if r := <-results; r.err == nil {
		t.Fatalf("a cancelled question must return ctx's error, got %+v", r.ans)
	}
	select {
	case <-q.gone:
	default:
		t.Fatal("the UI must see the question withdrawn")
	}

	// The session ends: questions asked and to come are denied.
	go func() {
		ans, err := a.answer(stdctx.Background(), bashRm)
		results <- result{ans, err}
	}()
	<-a.requests
	a.close()
	if r := <-results; r.err != nil || r.ans.Choice != approval.Deny {
		t.Fatalf("after close: %+v", r)
	}
	if ans, _ := a.answer(stdctx.Background(), bashRm); ans.Choice != approval.Deny {
		t.Fatalf("after close: %+v", ans)
	}
}

func TestFlagsAnswerBeforeThePerson(t *testing.T) {
	asked := 0
	person := func(stdctx.Context, approval.Request) (approval.Answer, error) {
		asked++
		return approval.Answer{Choice: approval.Deny}, nil
	}
	var mu sync.Mutex
	var seen []string
	ask := withFlags(approvalFlags{allow: []string{"bash"}}, person, func(e approvalEvent) { mu.Lock(); seen = append(seen, e.By); mu.Unlock() })
	if ans, _ := ask(stdctx.Background(), bashRm); ans.Choice != approval.AllowOnce || asked != 0 {
		t.Fatalf("--allow bash must answer without asking: %+v asked %d", ans, asked)
	}
	if ans, _ := ask(stdctx.Background(), editReq); ans.Choice != approval.Deny || asked != 1 {
		t.Fatalf("edit goes to the person: %+v asked %d", ans, asked)
	}
	if strings.Join(seen, ",") != "--allow bash" {
		t.Fatalf("notified %v", seen)
	}
}

// deadline bounds a wait in a test that would otherwise hang.
func deadline(t *testing.T) <-chan time.Time {
	t.Helper()
	return time.After(15 * time.Second)
}

// The person approves what the question shows, so it must be what runs: a
// newline is a command separator, a \r or an escape sequence can overwrite
// what the terminal shows, and a long command must not hide its tail.
func TestQuestionShowsTheWholeCommandFaithfully(t *testing.T) {
	cases := []struct {
		name, command, want string
		hidden              string
	}{
		{"newline", "ls\nrm -rf ~", "ls\n    rm -rf ~", ""},
		{"carriage return", "rm -rf ~ #\rls       ", `rm -rf ~ #\x0dls`, "\r"},
		{"escape sequence", "rm -rf ~ #\x1b[2K\x1b[1Gls", `rm -rf ~ #\x1b[2K\x1b[1Gls`, "\x1b"},
		{"bidi override", "echo \u202eharmless", `echo \u202eharmless`, "\u202e"},
		{"long", strings.Repeat("echo ok; ", 40) + "rm -rf ~", "rm -rf ~", ""},
	}
	for _, c := range cases {
		q := question(approval.Request{AgentID: "main", Tool: "bash", Summary: c.command, Pattern: "rm"})
		if !strings.Contains(q, c.want) {
			t.Errorf("%s: the question does not show %q:\n%s", c.name, c.want, q)
		}
		if c.hidden != "" && strings.Contains(q, c.hidden) {
			t.Errorf("%s: the question passes %q to the terminal:\n%q", c.name, c.hidden, q)
		}
	}
	huge := strings.Repeat("x", maxShown) + "; rm -rf ~"
	q := question(approval.Request{AgentID: "main", Tool: "bash", Summary: huge})
	if !strings.Contains(q, "10 more bytes not shown") {
		t.Errorf("a command cut short must say how much is hidden:\n%s", q[len(q)-300:])
	}
}
