package sdktest_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/sdk/sdktest"
	"go.uber.org/goleak"
)

// helperEnv makes the test binary serve guard() instead of running tests:
// the child process of the Exec tests.
const helperEnv = "SDKTEST_HELPER_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		guard().Serve()
		return
	}
	goleak.VerifyTestMain(m)
}

// guard is the plugin under test: an admission listener that refuses a
// word from its config and lowercases what it lets through, a tool, a tool
// that forgets to answer, and a notification listener that fails.
func guard() *sdk.Plugin {
	p := sdk.New("guard", "1.2.3")
	word := "password"
	p.OnConfigure(func(config json.RawMessage) error {
		var c struct{ Word string }
		if err := json.Unmarshal(config, &c); err != nil {
			return err
		}
		if c.Word == "forbidden" {
			return errs.New("GUARD_BAD_CONFIG", "the word may not be forbidden").WithReason("guard/config")
		}
		if c.Word != "" {
			word = c.Word
		}
		return nil
	})
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		text := a.GetMessage().GetContent()
		if strings.Contains(text, word) {
			return sdk.Reject("guard/secret", "the message contains "+word, false), nil
		}
		a.Message.Content = strings.ToLower(text)
		return next(ctx, a)
	})
	p.Tool(&sdk.ToolDecl{Name: "shout", Description: "Upper-cases a text.",
		Parameters: `{"type":"object","properties":{"text":{"type":"string"}}}`}, func(_ stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		var args struct{ Text string }
		if err := sdk.Arguments(inv, &args); err != nil {
			return nil, err
		}
		return sdk.Text(strings.ToUpper(args.Text) + " in " + inv.GetWorkspace()), nil
	})
	p.Tool(&sdk.ToolDecl{Name: "deadline"}, func(ctx stdctx.Context, _ *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return sdk.Text("none"), nil
		}
		return sdk.Text(time.Until(dl).Round(time.Hour).String()), nil
	})
	p.Tool(&sdk.ToolDecl{Name: "forgetful"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) { return nil, nil })
	p.OnStatus(func(_ stdctx.Context, s *sdk.StatusChange) error {
		return errs.New("GUARD_STATUS", "status "+s.GetTo()+" of "+s.GetAgentId())
	})
	return p
}

func admission(text string) *sdk.Admission {
	return &sdk.Admission{AgentId: "main", Message: &sdk.Message{Role: "user", Content: text}}
}

// hosts runs check against guard served both ways — in this process, and
// as a child started like dsh starts it — and each with its calls on the
// Mux stream, as dsh sends them to a Go plugin, and as RPCs of their own,
// as dsh sends them to a plugin without it.
func hosts(t *testing.T, check func(t *testing.T, h *sdktest.Host), opts ...sdktest.Option) {
	for _, path := range []struct {
		name string
		opts []sdktest.Option
	}{{"mux", nil}, {"rpcs", []sdktest.Option{sdktest.WithRPCs()}}} {
		opts := append(slices.Clone(opts), path.opts...)
		checked := func(t *testing.T, h *sdktest.Host) {
			if h.Mux() != (path.name == "mux") {
				t.Fatalf("the host sends calls on the Mux stream: %v, want it on the %s path", h.Mux(), path.name)
			}
			check(t, h)
		}
		t.Run(path.name+"/in-process", func(t *testing.T) { checked(t, sdktest.Start(t, guard(), opts...)) })
		t.Run(path.name+"/child", func(t *testing.T) {
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			checked(t, sdktest.Exec(t, exe, nil, append(opts, sdktest.WithEnv(helperEnv+"=1"))...))
		})
	}
}

func TestDescribe(t *testing.T) {
	hosts(t, func(t *testing.T, h *sdktest.Host) {
		d := h.Describe()
		if d.GetName() != "guard" || d.GetVersion() != "1.2.3" || d.GetSdk() != "go/"+sdk.Version {
			t.Fatalf("described as %q %q built with %q", d.GetName(), d.GetVersion(), d.GetSdk())
		}
		if h.Protocol() != sdk.ProtocolVersion || !h.Listens(sdk.AdmissionEvent) || h.Tool("shout") == nil || h.Tool("nope") != nil {
			t.Fatalf("protocol %d, listeners %v, tools %v", h.Protocol(), d.GetListeners(), d.GetTools())
		}
	})
}

func TestAdmission(t *testing.T) {
	hosts(t, func(t *testing.T, h *sdktest.Host) {
		got, err := h.Admission(t.Context(), admission("my letmein is X"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision.GetKind() != "reject" || got.Decision.GetReason() != "guard/secret" || got.Next != nil {
			t.Fatalf("configured word: got %v, next %v; want a rejection without next", got.Decision, got.Next)
		}
		var seen string
		got, err = h.Admission(t.Context(), admission("Hello THERE"), func(_ stdctx.Context, a *sdk.Admission) (*sdk.Decision, error) {
			seen = a.GetMessage().GetContent()
			return sdk.Admit(), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision.GetKind() != "admit" || seen != "hello there" || got.Next.GetMessage().GetContent() != "hello there" {
			t.Fatalf("got %v; the rest of the chain saw %q, want the lowercased message", got.Decision, seen)
		}
		// The rest of the chain failing reaches the plugin and comes back
		// with its code.
		_, err = h.Admission(t.Context(), admission("hi"), func(stdctx.Context, *sdk.Admission) (*sdk.Decision, error) {
			return nil, errs.New("LATER_FAILED", "a later listener failed").WithReason("later/broke")
		})
		if !errs.Has(err, "LATER_FAILED", "later/broke") {
			t.Fatalf("got %v, want the chain's LATER_FAILED back", err)
		}
	}, sdktest.WithConfig(map[string]any{"word": "letmein"}))
}

func TestTools(t *testing.T) {
	hosts(t, func(t *testing.T, h *sdktest.Host) {
		res, err := h.CallTool(t.Context(), "shout", map[string]string{"text": "hi"}, sdktest.InWorkspace("/ws"))
		if err != nil || res.GetContent() != "HI in /ws" || res.GetIsError() {
			t.Fatalf("shout: %v, %v", res, err)
		}
		_, err = h.CallTool(t.Context(), "shout", `{"text": 5}`)
		if !errs.HasCode(err, errs.InvalidArgument) {
			t.Fatalf("arguments of the wrong type: got %v, want INVALID_ARGUMENT", err)
		}
		_, err = h.CallTool(t.Context(), "forgetful", nil)
		if !errs.Has(err, sdk.EmptyResult, sdk.ReasonEmptyResult) {
			t.Fatalf("a handler returning nil, nil: got %v, want %s", err, sdk.EmptyResult)
		}
		if _, err := h.CallTool(t.Context(), "nope", nil); !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), "forgetful") {
			t.Fatalf("an undeclared tool: got %v, want INVALID_ARGUMENT naming the declared ones", err)
		}
	})
}

// TestCallDeadline: the caller's deadline reaches the handler, on the
// stream as in an RPC of its own.
func TestCallDeadline(t *testing.T) {
	hosts(t, func(t *testing.T, h *sdktest.Host) {
		ctx, cancel := stdctx.WithTimeout(t.Context(), 3*time.Hour)
		defer cancel()
		res, err := h.CallTool(ctx, "deadline", nil)
		if err != nil || res.GetContent() != "3h0m0s" {
			t.Fatalf("the handler saw the deadline %v, %v; want 3h from now", res.GetContent(), err)
		}
	})
}

func TestEmit(t *testing.T) {
	hosts(t, func(t *testing.T, h *sdktest.Host) {
		err := h.Emit(t.Context(), sdk.StatusEvent, "main", &pluginv1.Payload{Event: &pluginv1.Payload_Status{Status: &sdk.StatusChange{AgentId: "main", From: "idle", To: "running"}}})
		if !errs.HasCode(err, "GUARD_STATUS") || !strings.Contains(err.Error(), "status running of main") {
			t.Fatalf("got %v, want the listener's GUARD_STATUS", err)
		}
	})
}

// A failure of the test harness itself is reported with t.Fatalf; fatal
// records it and ends the goroutine, as testing does.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestConfigRejected(t *testing.T) {
	f := &fatal{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sdktest.Start(f, guard(), sdktest.WithConfig(map[string]string{"word": "forbidden"}))
	}()
	<-done
	if !strings.Contains(f.msg, "GUARD_BAD_CONFIG (guard/config)") || !strings.Contains(f.msg, "rejected its config") {
		t.Fatalf("got %q, want the plugin's GUARD_BAD_CONFIG", f.msg)
	}
}

func TestExecNotAPlugin(t *testing.T) {
	f := &fatal{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sdktest.Exec(f, "/bin/echo", []string{"hello"})
	}()
	<-done
	if !strings.Contains(f.msg, string(sdktest.StartFailed)) || !strings.Contains(f.msg, "did not complete the plugin handshake") {
		t.Fatalf("got %q, want SDKTEST_START_FAILED about the handshake", f.msg)
	}
}

// TestConcurrentCalls: calls in flight at once — on the Mux stream, frames
// of one stream told apart by their ids — each get their own answer, while
// the rest of every chain waits until all of them reached it.
func TestConcurrentCalls(t *testing.T) {
	hosts(t, func(t *testing.T, h *sdktest.Host) {
		const n = 20
		var reached sync.WaitGroup
		reached.Add(n)
		errc := make(chan error, n)
		for i := range n {
			go func() {
				text := fmt.Sprintf("Call %d", i)
				got, err := h.Admission(t.Context(), admission(text), func(_ stdctx.Context, a *sdk.Admission) (*sdk.Decision, error) {
					reached.Done()
					reached.Wait()
					return sdk.Reject("rest/echo", a.GetMessage().GetContent(), false), nil
				})
				if err == nil && got.Decision.GetMessage() != strings.ToLower(text) {
					err = fmt.Errorf("%q got the answer %q", text, got.Decision.GetMessage())
				}
				errc <- err
			}()
		}
		for range n {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
	})
}
