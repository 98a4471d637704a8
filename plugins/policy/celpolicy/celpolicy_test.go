package celpolicy_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/plugins/policy/celpolicy"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// decisions records what the admission stage decided, from outside the
// policy, so a test sees the policy and version a refusal names.
type decisions struct {
	mu   sync.Mutex
	list []agentcontroller.Decision
}

func (d *decisions) last() agentcontroller.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list[len(d.list)-1]
}

func record(t *testing.T, e *testkit.Env) *decisions {
	t.Helper()
	d := &decisions{}
	_, err := agentcontroller.EventAdmission.On(e.Root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		out, err := next.Call(ctx, a)
		d.mu.Lock()
		d.list = append(d.list, out)
		d.mu.Unlock()
		return out, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func deliver(e *testkit.Env, a *testkit.Recorder, text string) (agentcontroller.Refusal, bool) {
	_, err := e.Controller.Deliver(stdctx.Background(), a, testkit.Send(text))
	return agentcontroller.RefusalOf(err)
}

// rulesFile is a rules file refusing prompts that contain each word of
// refuse, one rule per word.
func rulesFile(refuse ...string) string {
	var b strings.Builder
	b.WriteString("admission:\n")
	for _, w := range refuse {
		fmt.Fprintf(&b, "  - name: no-%s\n    when: request.content.contains(%q)\n    action: refuse\n    message: no %s here\n", w, w, w)
	}
	return b.String()
}

// TestFileReloadNeverLetsAMessageThrough: while the rules file changes
// under a stream of deliveries, every message is judged by a whole
// version — one both versions refuse is refused every time — a version
// that does not compile is not taken, and the next good one is, its
// decisions naming its own version.
func TestFileReloadNeverLetsAMessageThrough(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(file, []byte(rulesFile("secret", "alpha")), 0o644)
	e := testkit.New(t)
	seen := record(t, e)
	e.Apply(celpolicy.Plugin, celpolicy.Config{File: file, ReloadInterval: 5 * time.Millisecond})
	a := e.Agent("a")

	if r, ok := deliver(e, a, "alpha"); !ok || r.Reason != "policy/no-alpha" || r.Message != "no alpha here" {
		t.Fatalf("v1 refusal: %+v %v", r, ok)
	}
	v1 := seen.last()
	if v1.Policy != celpolicy.ID || !strings.HasPrefix(v1.PolicyVersion, "sha256:") {
		t.Fatalf("decision %+v", v1)
	}

	// Deliveries of "secret" run all along; every one must be refused.
	stop := make(chan struct{})
	var through, judged atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, ok := deliver(e, a, "the secret"); !ok {
				through.Add(1)
			}
			judged.Add(1)
		}
	}()

	// A version with a type error: refused, v1 keeps deciding.
	os.WriteFile(file, []byte(rulesFile("secret")+"  - name: typo\n    when: request.contnt == \"x\"\n    action: refuse\n"), 0o644)
	time.Sleep(100 * time.Millisecond)
	if r, ok := deliver(e, a, "alpha"); !ok || r.Reason != "policy/no-alpha" || seen.last().PolicyVersion != v1.PolicyVersion {
		t.Fatalf("after a bad version: %+v %v %+v", r, ok, seen.last())
	}

	// A good version: alpha passes, beta is refused, under v2.
	os.WriteFile(file, []byte(rulesFile("secret", "beta")), 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := deliver(e, a, "alpha"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new version was never taken")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r, ok := deliver(e, a, "beta"); !ok || r.Reason != "policy/no-beta" {
		t.Fatalf("v2: %+v %v", r, ok)
	}
	if v2 := seen.last(); v2.PolicyVersion == v1.PolicyVersion || v2.Policy != celpolicy.ID {
		t.Fatalf("v2 decision %+v, v1 %+v", v2, v1)
	}
	close(stop)
	wg.Wait()
	if through.Load() != 0 || judged.Load() == 0 {
		t.Fatalf("%d of %d messages every version refuses got through", through.Load(), judged.Load())
	}
}

// TestHoldWaitsForTheRuleThenRefuses: a hold rule holds a message while
// its when: holds and lets it go when it stops; one it still holds at
// max_hold is refused with its message.
func TestHoldWaitsForTheRuleThenRefuses(t *testing.T) {
	until := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	e := testkit.New(t)
	e.Apply(celpolicy.Plugin, celpolicy.Config{Recheck: 20 * time.Millisecond, Params: map[string]any{"until": until}, Admission: []celpolicy.Rule{
		{Name: "quiet-hours", When: `request.content == "later" && now < timestamp(params.until)`, Action: "hold", Message: "quiet hours", MaxHold: 10 * time.Second},
		{Name: "never", When: `request.content == "never"`, Action: "hold", Message: "not now", MaxHold: 100 * time.Millisecond},
	}})
	a := e.Agent("a")
	start := time.Now()
	if r, ok := deliver(e, a, "later"); ok {
		t.Fatalf("refused: %+v", r)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("admitted after %s; the rule held until %s", waited, until)
	}
	if r, ok := deliver(e, a, "never"); !ok || r.Reason != "policy/never" || !strings.Contains(r.Message, "not now (held for") {
		t.Fatalf("held past max_hold: %+v %v", r, ok)
	}
}

// TestFailurePolicy: a rule that cannot be evaluated refuses under fail
// (the default) and is skipped under ignore.
func TestFailurePolicy(t *testing.T) {
	rules := []celpolicy.Rule{{Name: "needs-param", When: `request.content == params.missing`, Action: "refuse", Message: "m"}}
	e := testkit.New(t)
	e.Apply(celpolicy.Plugin, celpolicy.Config{Admission: rules})
	a := e.Agent("a")
	if r, ok := deliver(e, a, "hi"); !ok || r.Reason != "policy/needs-param" || !strings.Contains(r.Message, "fails closed") {
		t.Fatalf("fail: %+v %v", r, ok)
	}
	e2 := testkit.New(t)
	e2.Apply(celpolicy.Plugin, celpolicy.Config{Admission: rules, FailurePolicy: "ignore"})
	if r, ok := deliver(e2, e2.Agent("a"), "hi"); ok {
		t.Fatalf("ignore: %+v", r)
	}
}

// TestRulesFileErrorsNameTheirLine: a rules file's type error is reported
// at its file and line when the config is checked.
func TestRulesFileErrorsNameTheirLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rules.yaml")
	os.WriteFile(file, []byte(rulesFile("alpha")+"  - name: typo\n    when: request.contnt == \"x\"\n    action: refuse\n"), 0o644)
	err := celpolicy.Config{File: file}.Validate()
	want := file + `:7: admission[1].when: rule "typo": when: ERROR: <input>:1:8: undefined field 'contnt'`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant …%s…", err, want)
	}
	if err := (celpolicy.Config{File: file + ".missing"}).Validate(); err == nil || !strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a missing file: %v", err)
	}
}
