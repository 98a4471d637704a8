//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// devPreset is workspace-write with the network on in bash's sandbox, so
// a dev server a job runs can be reached from outside it.
const devPreset = `presets:
  dev:
    - use: tools.files
    - use: tools.bash
      config: {jobs: {enabled: true}, sandbox: {network: on}}
    - use: tools.permission
      config: {mode: workspace-write}
`

// jobsConfig writes a config whose scripted model gives replies, with the
// agent's preset (and what defines it) and a jsonl store, and returns it
// with the workspace and the session's log.
func jobsConfig(t *testing.T, replies, preset, presets string) (cfg, ws, logPath string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "ws")
	store := filepath.Join(dir, "sessions")
	os.Mkdir(ws, 0o755)
	cfg = filepath.Join(dir, "config.yaml")
	text := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies +
		fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", store) +
		presets + "agents:\n  - id: coder\n    provider: scripted\n    preset: " + preset + "\n    workspace: " + ws + "\n    session: jobs\nlog:\n  level: warn\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, ws, filepath.Join(store, "jobs.jsonl")
}

// logEntry is what these tests read of a session's log line.
type logEntry struct {
	Type    string `json:"type"`
	Message *struct {
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
		From *struct {
			Principal struct{ Kind, ID string } `json:"principal"`
			Entry     string                    `json:"entry"`
		} `json:"from"`
	} `json:"message"`
}

// readJobLog returns the log's entries so far.
func readJobLog(path string) []logEntry {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Message != nil {
			out = append(out, e)
		}
	}
	return out
}

// waitJobsLog waits until the log holds an entry ok accepts and returns all.
func waitJobsLog(t *testing.T, path string, what string, ok func(logEntry) bool) []logEntry {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		entries := readJobLog(path)
		for _, e := range entries {
			if ok(e) {
				return entries
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("the log never showed %s:\n%s", what, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupRuns reports whether a process that is not a zombie is in group
// pgid (kill(-pgid, 0) would also find zombies nobody reaped yet).
func groupRuns(pgid int) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

var jobPID = regexp.MustCompile(`started job-1 \(pid (\d+)\)`)

// TestJobsThroughDshRunDieWithAKilledDsh: through `dsh run` and the
// scripted model, a dev server (python's http.server) and a read loop run
// as jobs in the sandbox; the loop answers what job_input wrote, the
// server's start is polled with job_output, the loop is killed with
// job_kill; then dsh is SIGKILLed — dsh alone, not its group — and the
// server's whole process group is gone too, through childproc's watcher.
func TestJobsThroughDshRunDieWithAKilledDsh(t *testing.T) {
	cfg, _, logPath := jobsConfig(t, `        - tool_calls: [{name: bash, arguments: '{"command": "python3 -u -m http.server 0 --bind 127.0.0.1", "background": true}'}]
        - tool_calls: [{name: bash, arguments: '{"command": "while read -r l; do echo \"got $l\"; done", "background": true}'}]
        - tool_calls: [{name: job_input, arguments: '{"id": "job-2", "input": "ping\n"}'}]
        - tool_calls: [{name: job_output, arguments: '{"id": "job-2", "wait": 20}'}]
        - tool_calls: [{name: job_output, arguments: '{"id": "job-1", "wait": 20}'}]
        - tool_calls: [{name: job_kill, arguments: '{"id": "job-2"}'}]
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 60"}'}]
        - text: never reached
`, "dev", devPreset)
	cmd := exec.Command(dshBin, "run", "--config", cfg, "--yolo", "-p", "start the dev server")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })

	// Six tool results, then the seventh step's command runs.
	entries := waitJobsLog(t, logPath, "the seventh step's call", func(e logEntry) bool {
		return e.Type == "assistant/message" && len(e.Message.ToolCalls) == 1 && strings.Contains(e.Message.ToolCalls[0].Arguments, "sleep 60")
	})
	var results []string
	for _, e := range entries {
		if e.Type == "tool/result" {
			results = append(results, e.Message.Content)
		}
	}
	if len(results) != 6 {
		t.Fatalf("want six results before the last step, got %q", results)
	}
	m := jobPID.FindStringSubmatch(results[0])
	if m == nil {
		t.Fatalf("the server did not start as a job: %q", results[0])
	}
	server, _ := strconv.Atoi(m[1])
	for i, want := range map[int]string{1: "started job-2", 2: "wrote 5 bytes to job-2's stdin", 3: "got ping\n", 4: "Serving HTTP on 127.0.0.1 port", 5: "job-2 ended: killed by job_kill"} {
		if !strings.Contains(results[i], want) {
			t.Errorf("result %d lacks %q: %q", i+1, want, results[i])
		}
	}
	if !groupRuns(server) {
		t.Fatalf("the server's group %d is not running before dsh is killed", server)
	}
	port := regexp.MustCompile(`port (\d+)`).FindStringSubmatch(results[4])
	if port == nil {
		t.Fatalf("no port in %q", results[4])
	}
	resp, err := http.Get("http://127.0.0.1:" + port[1] + "/")
	if err != nil {
		t.Fatalf("the dev server does not answer: %v", err)
	}
	resp.Body.Close()
	// dsh alone, as a crash or the OOM killer would: no teardown runs.
	syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for groupRuns(server) {
		if time.Now().After(deadline) {
			t.Fatalf("the dev server's process group %d outlived a SIGKILLed dsh", server)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAJobsEndWakesTheIdleAgent: in an interactive `dsh run`, a turn
// starts a job and ends; when the job exits, its end reaches the idle
// agent as a message from the job, through admission, and the model
// answers it in a turn of its own. /jobs lists the job and how it ended;
// /jobs kill ends another (and the agent is told); a third dies with the
// session when the person leaves.
func TestAJobsEndWakesTheIdleAgent(t *testing.T) {
	cfg, _, logPath := jobsConfig(t, `        - tool_calls: [{name: bash, arguments: '{"command": "sleep 1; echo finished; exit 3", "background": true}'}]
        - text: started it
        - text: noted the job's end
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 300", "background": true}'}]
        - text: another one
        - text: noted that job-2 was killed
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 301", "background": true}'}]
        - text: a third
`, "workspace-write", "")
	cmd := exec.Command(dshBin, "run", "--config", cfg, "--yolo")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=", "NO_COLOR=1")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close(); cmd.Process.Kill() })
	scr := &screen{}
	go io.Copy(scr, tty)
	pos := scr.waitFor(t, 0, "> ")
	io.WriteString(tty, "start a job\r")

	entries := waitJobsLog(t, logPath, "the answer to the job's end", func(e logEntry) bool {
		return e.Type == "assistant/message" && e.Message.Content == "noted the job's end"
	})
	var wake *logEntry
	for i, e := range entries {
		if e.Type == "user/message" && e.Message.From != nil && e.Message.From.Entry == "job" {
			wake = &entries[i]
		}
	}
	if wake == nil {
		t.Fatalf("no message from the job in the log: %+v", entries)
	}
	if wake.Message.From.Principal.Kind != "job" || wake.Message.From.Principal.ID != "job-1" ||
		!strings.Contains(wake.Message.Content, "[background job job-1 ended: exit code: 3]") || !strings.Contains(wake.Message.Content, "finished") {
		t.Fatalf("the job's message: %+v %q", wake.Message.From, wake.Message.Content)
	}
	pos = scr.waitFor(t, pos, "noted the job's end")
	io.WriteString(tty, "/jobs\r")
	pos = scr.waitFor(t, pos, "job-1  exit code: 3  0 bytes unread  sleep 1; echo finished; exit 3")

	// A second job, killed by the person with /jobs kill: the group goes.
	io.WriteString(tty, "one more\r")
	pos = scr.waitFor(t, pos, "started job-2")
	io.WriteString(tty, "/jobs\r")
	pos = scr.waitFor(t, pos, "job-2  running")
	m := regexp.MustCompile(`job-2  running \S+, pid (\d+)`).FindStringSubmatch(scr.text()[pos-len("job-2  running"):])
	if m == nil {
		t.Fatalf("no pid for job-2:\n%s", scr.text())
	}
	pid, _ := strconv.Atoi(m[1])
	io.WriteString(tty, "/jobs kill job-2\r")
	pos = scr.waitFor(t, pos, "(job-2 killed)")
	if groupRuns(pid) {
		t.Fatalf("job-2's group %d still runs after /jobs kill", pid)
	}
	// The model did not kill it: it is told.
	pos = scr.waitFor(t, pos, "noted that job-2 was killed")

	// A job still running when the person leaves dies with the session.
	io.WriteString(tty, "and a third\r")
	pos = scr.waitFor(t, pos, "started job-3")
	io.WriteString(tty, "/jobs\r")
	pos = scr.waitFor(t, pos, "job-3  running")
	m = regexp.MustCompile(`job-3  running \S+, pid (\d+)`).FindStringSubmatch(scr.text()[pos-len("job-3  running"):])
	if m == nil {
		t.Fatalf("no pid for job-3:\n%s", scr.text())
	}
	pid, _ = strconv.Atoi(m[1])
	leaveWithCtrlD(t, tty, cmd, scr)
	if groupRuns(pid) {
		t.Fatalf("job-3's group %d outlived its session", pid)
	}
}

// TestAJobOfTheShippedPresetDiesWithAKilledDsh: the same with
// workspace-write as dsh ships it (sandbox, network off) and a job whose
// shell keeps children of its own: dsh SIGKILLed alone, the job's whole
// group goes.
func TestAJobOfTheShippedPresetDiesWithAKilledDsh(t *testing.T) {
	cfg, _, logPath := jobsConfig(t, `        - tool_calls: [{name: bash, arguments: '{"command": "sleep 300 & sleep 301 & wait", "background": true}'}]
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 60"}'}]
        - text: never reached
`, "workspace-write", "")
	cmd := exec.Command(dshBin, "run", "--config", cfg, "--yolo", "-p", "start it")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	entries := waitJobsLog(t, logPath, "the job's start", func(e logEntry) bool {
		return e.Type == "tool/result" && jobPID.MatchString(e.Message.Content)
	})
	var job int
	for _, e := range entries {
		if m := jobPID.FindStringSubmatch(e.Message.Content); e.Type == "tool/result" && m != nil {
			job, _ = strconv.Atoi(m[1])
		}
	}
	waitJobsLog(t, logPath, "the second step's call", func(e logEntry) bool {
		return e.Type == "assistant/message" && len(e.Message.ToolCalls) == 1 && strings.Contains(e.Message.ToolCalls[0].Arguments, "sleep 60")
	})
	if !groupRuns(job) {
		t.Fatalf("the job's group %d is not running before dsh is killed", job)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for groupRuns(job) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's process group %d outlived a SIGKILLed dsh", job)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
