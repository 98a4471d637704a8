package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAKillMidCompactionLeavesAReadableLog kills `dsh run` while the
// summary request of a compaction streams. Nothing of the compaction is
// recorded, the log reads, the next run resumes it — closing the killed
// turn as interrupted — and compacts then; every prompt is in the log
// once.
func TestAKillMidCompactionLeavesAReadableLog(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "sessions", "main.jsonl")
	config := func(delay string) string {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
    config: {delay: `+delay+`}
  - use: session.jsonl
    config: {dir: `+filepath.Join(dir, "sessions")+`}
  - use: session.compact
    config: {window: 300}
agents:
  - {id: main, provider: scripted, session: main}
log: {level: warn}
`), 0o644)
		return cfg
	}
	slow := config("20ms")
	prompt := func(i int) string {
		return fmt.Sprintf("prompt %d: long enough to fill a small window quickly, lorem ipsum dolor sit amet, consectetur adipiscing elit", i)
	}
	killed := -1
	for i := 0; i < 8 && killed < 0; i++ {
		cmd := exec.Command(dshBin, "run", "--config", slow, "-p", prompt(i))
		cmd.Env = append(os.Environ(), "DSH_CONFIG=")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "(compacting ") {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				killed = i
				break
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
	if killed < 0 {
		t.Fatal("eight runs in a 300-token window started no compaction")
	}
	before, _ := os.ReadFile(logPath)
	if strings.Contains(string(before), `"history/compacted"`) {
		t.Fatalf("a compaction killed while its summary streamed was recorded:\n%s", before)
	}
	if o := runDsh(t, "", "sessions", "show", "--config", slow, "main"); o.code != 0 {
		t.Fatalf("the log does not read after the kill: %d %s", o.code, o.stderr)
	}

	o := runDsh(t, "", "run", "--config", config("0s"), "-p", "after the kill")
	if o.code != 0 {
		t.Fatalf("the resumed run: %d %s", o.code, o.stderr)
	}
	if !strings.Contains(o.stderr, fmt.Sprintf("the last turn (%d) of session main was interrupted", killed+1)) {
		t.Fatalf("the resumed run does not report the killed turn:\n%s", o.stderr)
	}
	lines := crashLog(t, logPath)
	compacted := 0
	for _, l := range lines {
		if l.Type == "history/compacted" {
			compacted++
		}
	}
	if compacted == 0 {
		t.Fatalf("the resumed run did not compact:\n%s", o.stderr)
	}
	n := crashPrompts(lines)
	for i := 0; i <= killed; i++ {
		if n[prompt(i)] != 1 {
			t.Fatalf("prompt %d is in the log %d times: %v", i, n[prompt(i)], n)
		}
	}
	if n["after the kill"] != 1 {
		t.Fatalf("the resumed prompt is in the log %d times", n["after the kill"])
	}
}
