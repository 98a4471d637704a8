//go:build linux

package bash_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
)

// hosted starts a host whose agent runs the scripted replies with bash
// (jobs on, wake as given, no sandbox, nothing asks), opens its session
// and sends one prompt; it returns the session service and the id.
func hosted(t *testing.T, wake, replies string) (*sessions.Controller, string) {
	t.Helper()
	yaml := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies +
		"agents:\n  - id: main\n    provider: scripted\n    workspace: " + t.TempDir() + "\n    presets: [tools]\n" +
		"presets:\n  tools:\n    - use: tools.bash\n      config: {jobs: {enabled: true, wake: " + wake + "}, sandbox: {mode: off}}\n" +
		"    - use: tools.permission\n      config: {mode: full-access}\n"
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("closing the host: %v", err)
		}
	})
	svc := h.Sessions()
	in, err := svc.Ensure(t.Context(), sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := svc.Prompt(t.Context(), in.ID, sessions.PromptRequest{Content: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	return svc, in.ID
}

// fromJobs are the messages of the session's log that came from a job.
func fromJobs(t *testing.T, svc *sessions.Controller, id string) []session.Event {
	t.Helper()
	evs, err := svc.History(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []session.Event
	for _, e := range evs {
		if e.Type == "user/message" && e.Message != nil && e.Message.From != nil && e.Message.From.Entry == "job" {
			out = append(out, e)
		}
	}
	return out
}

// TestAJobsEndIsToldOnceAndOnlyWhenUnread: with wake on, a job that ends
// unread is told to the idle agent once, through admission, from the job
// on behalf of nobody (the prompt had no principal); a job whose end the
// model read with job_output, or that it killed, is not told; with wake
// off nothing is.
func TestAJobsEndIsToldOnceAndOnlyWhenUnread(t *testing.T) {
	t.Run("unread", func(t *testing.T) {
		svc, id := hosted(t, "on", `        - tool_calls: [{name: bash, arguments: '{"command": "echo bye; exit 4", "background": true}'}]
        - text: started
        - text: told
`)
		deadline := time.Now().Add(10 * time.Second)
		for len(fromJobs(t, svc, id)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the job's end was never told")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := svc.Idle(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		got := fromJobs(t, svc, id)
		if len(got) != 1 || !strings.HasPrefix(got[0].Message.Content, "[background job job-1 ended: exit code: 4]") ||
			!strings.HasSuffix(got[0].Message.Content, "Its unread output:\nbye\n") || got[0].Message.From.Principal.Kind != "job" {
			t.Fatalf("the job's messages: %+v", got)
		}
	})
	t.Run("read", func(t *testing.T) {
		svc, id := hosted(t, "on", `        - tool_calls: [{name: bash, arguments: '{"command": "echo bye; exit 4", "background": true}'}]
        - tool_calls: [{name: job_output, arguments: '{"id": "job-1", "wait": 10}'}]
        - tool_calls: [{name: job_output, arguments: '{"id": "job-1", "wait": 10}'}]
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 300", "background": true}'}]
        - tool_calls: [{name: job_kill, arguments: '{"id": "job-2"}'}]
        - text: done
        - text: told, which is wrong
`)
		time.Sleep(time.Second) // a wake would be under way by now
		if got := fromJobs(t, svc, id); len(got) != 0 {
			t.Fatalf("ends the model knew were told: %+v", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		svc, id := hosted(t, "off", `        - tool_calls: [{name: bash, arguments: '{"command": "exit 4", "background": true}'}]
        - text: started
        - text: told, which is wrong
`)
		time.Sleep(time.Second)
		if got := fromJobs(t, svc, id); len(got) != 0 {
			t.Fatalf("wake: off told %+v", got)
		}
	})
}
