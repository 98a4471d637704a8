package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Ctrl-C in the middle of a streamed answer ends the run interrupted, and
// what was printed stays in the session, marked as cut, and is said to be
// cut on stderr.
func TestAnInterruptedAnswerStaysInTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	cfg := writeConfig(t, "        - text: \"one two three four five six seven eight nine ten eleven twelve\"\n      delay: 100ms\n",
		fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", dir))
	cmd := exec.Command(dshBin, "run", "--config", cfg, "--session", "cut", "-p", "count")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	seen := ""
	for !strings.Contains(seen, "three") {
		b, err := r.ReadByte()
		if err != nil {
			t.Fatalf("the answer stopped before three words: %q (%v)", seen, err)
		}
		seen += string(b)
	}
	cmd.Process.Signal(syscall.SIGINT)
	rest, _ := bufio.NewReader(r).ReadString(0)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d; want %d; stderr:\n%s", code, exitInterrupted, stderr.String())
	}
	if !strings.Contains(stderr.String(), "(answer stopped here)") {
		t.Fatalf("stderr does not say the answer was cut:\n%s", stderr.String())
	}
	log, err := os.ReadFile(filepath.Join(dir, "cut.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var cut string
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, `"finish":"cut"`) {
			cut = line
		}
	}
	printed := strings.TrimSpace(seen + rest)
	if cut == "" || !strings.Contains(cut, `"content":"`+printed) || strings.Contains(cut, "twelve") {
		t.Fatalf("the log's cut answer %q does not hold what was printed (%q):\n%s", cut, printed, log)
	}
}
