package execplugin_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// policyConfig mounts the test plugin as an approval policy (its entry's
// extra lines in entry) in front of tools.clock, with a model that calls
// the clock with timezone tz and then answers.
func policyConfig(bin, tz, entry string) string {
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: clock, arguments: '{"timezone": "%s"}'}]
        - text: done
  - use: tools.clock
  - id: guard
    exec: %s
    env: {TESTPLUGIN_POLICY: "1"}
%sagents:
  - id: main
    provider: scripted
`, tz, bin, entry)
}

// toolResult runs one turn and returns what the model was told about its
// clock call.
func toolResult(t *testing.T, h *host.Host) llm.Message {
	t.Helper()
	if _, err := send(h, stdctx.Background(), "main", "what time is it"); err != nil {
		t.Fatal(err)
	}
	a, _ := h.Agent("main")
	var results []llm.Message
	for _, e := range a.Session().Events(1) {
		if e.Message != nil && e.Message.Role == llm.RoleTool {
			results = append(results, *e.Message)
		}
	}
	if len(results) == 0 {
		t.Fatal("the turn has no tool result")
	}
	return results[len(results)-1]
}

// TestAPolicyPluginDecides: a binary on tools/approve denies with its own
// reason (attributed to it), allows, rewrites the arguments (through next
// or in its verdict, both validated and used), and an unknown decision
// refuses the call rather than run it.
func TestAPolicyPluginDecides(t *testing.T) {
	bin, _ := binaries(t)
	for _, c := range []struct {
		tz       string
		isError  bool
		contains []string
	}{
		{"deny", true, []string{`was denied by "exec:guard"`, "testplugin does not tell the time in deny", "did not run"}},
		{"UTC", false, []string{"UTC"}},
		{"rewrite", false, []string{"UTC"}},
		{"verdict-rewrite", false, []string{"UTC"}},
		{"bad", true, []string{"exec:guard", `"maybe"`, "it must be allow, deny or ask"}},
	} {
		t.Run(c.tz, func(t *testing.T) {
			h, _ := startExec(t, policyConfig(bin, c.tz, ""))
			r := toolResult(t, h)
			if r.IsError != c.isError {
				t.Fatalf("is_error %v, want %v: %s", r.IsError, c.isError, r.Content)
			}
			for _, s := range c.contains {
				if !strings.Contains(r.Content, s) {
					t.Errorf("the model was told %q; it must contain %q", r.Content, s)
				}
			}
		})
	}
}

// TestAPolicyPluginAsksAPerson: an ask from a binary reaches the agent's
// answerer with the plugin's reason, and the answer decides.
func TestAPolicyPluginAsksAPerson(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, policyConfig(bin, "ask", ""))
	a, _ := h.Agent("main")
	svc, err := approval.Key.Get(a.Context())
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan approval.Request, 1)
	detach, err := svc.Attach("main", func(_ stdctx.Context, req approval.Request) (approval.Answer, error) {
		asked <- req
		return approval.Answer{Choice: approval.Deny, Reason: "not now"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	r := toolResult(t, h)
	select {
	case req := <-asked:
		if req.Reason != "testplugin wants a person to agree" || req.Tool != "clock" {
			t.Fatalf("the person was asked %+v", req)
		}
	default:
		t.Fatal("nobody was asked")
	}
	if !r.IsError || !strings.Contains(r.Content, "denied by the user: not now") {
		t.Fatalf("the model was told %q", r.Content)
	}
}

// TestAPolicyPluginThatIsDownFailsClosed: a policy that crashes during the
// call, and then stays down, denies each call naming itself; with
// on_unavailable: skip, the call passes on to the tool's default.
func TestAPolicyPluginThatIsDownFailsClosed(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, policyConfig(bin, "crash", "    max_restarts: -1\n"))
	r := toolResult(t, h)
	if !r.IsError || !strings.Contains(r.Content, `denied by "exec:guard"`) || !strings.Contains(r.Content, `plugin "guard"`) {
		t.Fatalf("a policy that crashed mid-call must deny naming itself: %q", r.Content)
	}
	p, _ := h.ExecPlugin("guard")
	waitDown(t, p)
	r = toolResult(t, h)
	if !r.IsError || !strings.Contains(r.Content, `denied by "exec:guard"`) || !strings.Contains(r.Content, "given up") {
		t.Fatalf("a policy that is down must deny naming itself: %q", r.Content)
	}

	h, _ = startExec(t, policyConfig(bin, "crash", "    max_restarts: -1\n    on_unavailable: skip\n"))
	toolResult(t, h) // crashes it
	p, _ = h.ExecPlugin("guard")
	waitDown(t, p)
	// The call reaches the clock, which refuses the time zone itself.
	if r := toolResult(t, h); strings.Contains(r.Content, "denied") || !strings.Contains(r.Content, `unknown time zone "crash"`) {
		t.Fatalf("on_unavailable: skip passes the call on: %q", r.Content)
	}
}

// waitDown waits until p's process is gone for good.
func waitDown(t *testing.T, p *execplugin.Plugin) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for execplugin.RPC(p) != nil || !execplugin.GivenUp(p) {
		if time.Now().After(deadline) {
			t.Fatal("the plugin did not go down")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRequiringAnUnknownCapabilityIsRefused: the plugin is not started,
// with PLUGIN_UNSUPPORTED naming what is missing and the host's version;
// what the host has is not reported missing.
func TestRequiringAnUnknownCapabilityIsRefused(t *testing.T) {
	bin, _ := binaries(t)
	cfg, err := config.Parse("exec.yaml", []byte(execConfig(bin, "{}", "    env: {TESTPLUGIN_REQUIRES: \"teleport,tools,session/outcome,x-ray\"}\n")), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err == nil {
		h.Close(stdctx.Background())
		t.Fatal("a plugin that requires what the host lacks was started")
	}
	e := findCode(err, execplugin.PluginUnsupported)
	if e == nil || e.Reason != execplugin.ReasonMissingCapability {
		t.Fatalf("want PLUGIN_UNSUPPORTED (%s), got %v", execplugin.ReasonMissingCapability, err)
	}
	for _, s := range []string{`"teleport", "x-ray"`, execplugin.HostVersion(), `plugin "guard"`} {
		if !strings.Contains(e.Message, s) {
			t.Errorf("the refusal must name %s: %s", s, e.Message)
		}
	}
	if got, _ := e.Details["missing"].([]string); !slices.Equal(got, []string{"teleport", "x-ray"}) {
		t.Errorf("details.missing %v", e.Details["missing"])
	}
}

// TestTheHostOffersEveryBridgedEvent: the one list holds every event a
// plugin can listen to, and the features.
func TestTheHostOffersEveryBridgedEvent(t *testing.T) {
	caps := execplugin.Capabilities()
	for name := range execplugin.BridgedEvents() {
		if !slices.Contains(caps, name) {
			t.Errorf("capabilities lack %s", name)
		}
	}
	for _, f := range []string{"tools", "emit-batch"} {
		if !slices.Contains(caps, f) {
			t.Errorf("capabilities lack %s", f)
		}
	}
}

// streamedAnswer is a reply of n words, which the scripted model streams
// one chunk a word.
func streamedAnswer(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("w%d", i)
	}
	return strings.Join(w, " ")
}

// streamTo runs a turn whose answer is n chunks to a plugin that records
// what it hears (its env in env) and returns its lines once the finish
// chunk arrived.
func streamTo(t *testing.T, n int, env string) []string {
	t.Helper()
	bin, _ := binaries(t)
	file := filepath.Join(t.TempDir(), "chunks")
	h, _ := startExec(t, fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      delay: 200us
      replies: [{text: "%s"}]
  - id: listener
    exec: %s
    env: {TESTPLUGIN_CHUNKS: %q%s}
agents:
  - id: main
    provider: scripted
`, streamedAnswer(n), bin, file, env))
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "talk"}); err != nil {
		t.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
	deadline := time.Now().Add(20 * time.Second)
	for {
		raw, _ := os.ReadFile(file)
		if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "chunk finish") }) {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finish chunk never reached the plugin; it heard %d lines", strings.Count(string(raw), "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// messagesAndChunks splits what the plugin heard.
func messagesAndChunks(lines []string) (singles, batches, batched int, texts []string) {
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "emit "):
			singles++
		case strings.HasPrefix(l, "batch "):
			var n int
			fmt.Sscanf(l, "batch %d", &n)
			batches++
			batched += n
		case strings.HasPrefix(l, "chunk text "):
			texts = append(texts, strings.TrimSpace(strings.TrimPrefix(l, "chunk text ")))
		}
	}
	return
}

// TestBatchedChunksKeepOrderAndCount: a plugin that accepts emit-batch
// gets a 2,000-chunk answer in fewer messages than chunks, every chunk
// once, in order.
func TestBatchedChunksKeepOrderAndCount(t *testing.T) {
	const n = 2000
	singles, batches, batched, texts := messagesAndChunks(streamTo(t, n, ""))
	want := strings.Fields(streamedAnswer(n))
	if !slices.Equal(texts, want) {
		t.Fatalf("the plugin heard %d text chunks, want %d in order", len(texts), n)
	}
	if singles != 0 || batches == 0 || batches >= n || batched < n {
		t.Fatalf("%d single emits and %d batches carrying %d notifications for %d chunks", singles, batches, batched, n)
	}
	t.Logf("%d chunks in %d batches", n, batches)
}

// TestABinaryWithoutTheNewFieldsGetsSingleEmits: a plugin built before
// capabilities (no accepts, no EmitBatch) still starts and hears every
// chunk, in order, one Emit each, as before.
func TestABinaryWithoutTheNewFieldsGetsSingleEmits(t *testing.T) {
	const n = 200
	singles, batches, _, texts := messagesAndChunks(streamTo(t, n, ", TESTPLUGIN_OLD: \"1\""))
	if !slices.Equal(texts, strings.Fields(streamedAnswer(n))) {
		t.Fatalf("the plugin heard %d text chunks, want %d in order", len(texts), n)
	}
	if batches != 0 || singles < n {
		t.Fatalf("%d single emits and %d batches for %d chunks", singles, batches, n)
	}
}

// findCode returns the first error of code in err's tree.
func findCode(err error, code errs.Code) *errs.Error {
	if x, ok := err.(*errs.Error); ok && x.Code == code {
		return x
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if c := u.Unwrap(); c != nil {
			return findCode(c, code)
		}
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			if e := findCode(c, code); e != nil {
				return e
			}
		}
	}
	return nil
}
