package main

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/session"
)

// /cancel cancels the session by id through the session service: the
// running turn ends, the line queued behind it is dropped with who
// cancelled recorded, and the screen says so.
func TestInteractiveCancelCancelsTheSession(t *testing.T) {
	ws := t.TempDir()
	h, sess := startInProcess(t, fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 60"}'}]
        - text: never reached
agents:
  - id: main
    provider: scripted
    preset: workspace-write
    workspace: %s
`, ws))
	stdin, typing := io.Pipe()
	scr := &screen{}
	done := make(chan error, 1)
	go func() {
		done <- interactive(h, sess, stdin, scr, scr, make(chan os.Signal), approvalFlags{yolo: true}, defaultEcho)
	}()
	pos := scr.waitFor(t, 0, "> ")
	io.WriteString(typing, "wait a minute\n")
	pos = scr.waitFor(t, pos, "→ bash")
	io.WriteString(typing, "and then this\n")
	pos = scr.waitFor(t, pos, "(queued)")
	// "(queued)" is printed as the line is handed to the terminal's
	// sender; wait until the session has it, so the drop is the
	// session's to record (a line the sender still holds is dropped by
	// the terminal alone; services/sessions tests a cancel meeting a
	// line in admission).
	waitPending(t, sess)
	io.WriteString(typing, "/cancel\n")
	scr.waitFor(t, pos, "not delivered (dropped: /cancel in dsh run cancelled the turn): and then this")
	// The session recorded who dropped the queued line.
	evs, err := sess.svc.History(stdctx.Background(), sess.id(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The drop and the cancelled turn's end are recorded in either order:
	// look for the drop, not at the last event.
	dropped := false
	for _, e := range evs {
		dropped = dropped || e.Type == session.MessageDropped && e.By == "/cancel in dsh run"
	}
	if !dropped {
		t.Fatalf("no event records the queued line dropped by /cancel: %+v", evs)
	}
	typing.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// waitPending waits until the session's agent has a message queued.
func waitPending(t *testing.T, sess *current) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := sess.svc.Info(stdctx.Background(), sess.id())
		if err == nil && in.Pending > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued line never reached the session: %+v %v", in, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
