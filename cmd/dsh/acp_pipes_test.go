package main

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// An editor that closes both of dsh acp's pipes (it crashed, or quit
// without a word) gets the documented clean exit: dsh writes its answer
// into the closed stdout, must not die of SIGPIPE there, and exits 0 once
// stdin ends, with its sessions closed.
func TestACPClosedPipesExitCleanly(t *testing.T) {
	cfg := writeConfig(t, "        - text: hi\n", "")
	cmd := exec.Command(dshBin, "acp", "--config", cfg)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	send := func(line string) {
		if _, err := stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if l, err := out.ReadString('\n'); err != nil || !strings.Contains(l, `"id":1`) {
		t.Fatalf("%q %v", l, err)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + t.TempDir() + `","mcpServers":[]}}`)
	if l, err := out.ReadString('\n'); err != nil || !strings.Contains(l, `"sessionId"`) {
		t.Fatalf("%q %v", l, err)
	}
	// The editor stops reading; what dsh answers next goes into a pipe
	// nobody reads.
	stdout.Close()
	send(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}`)
	time.Sleep(200 * time.Millisecond)
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("dsh acp died of %v\nstderr: %s", ws.Signal(), stderr.String())
			}
		}
		if err != nil {
			t.Fatalf("exit: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("dsh acp did not exit after its pipes closed")
	}
}
