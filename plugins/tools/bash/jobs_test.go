//go:build linux

package bash_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/tools/bash"
	"github.com/dsh-go/dsh/services/jobs"
	"github.com/dsh-go/dsh/services/tools"
)

// withJobs is the open config with background jobs on.
func withJobs(change func(*bash.Config)) bash.Config {
	return open(func(c *bash.Config) {
		c.Jobs.Enabled = true
		if change != nil {
			change(c)
		}
	})
}

// call runs tool with args and returns its result.
func (a *agent) call(tool string, args map[string]any) tools.Result {
	a.t.Helper()
	raw, _ := json.Marshal(args)
	r, err := a.svc.Execute(a.t.Context(), a.root, tools.Call{ID: "c-" + tool, Name: tool, Arguments: raw, Workspace: a.ws})
	if err != nil {
		a.t.Fatalf("%s must end in a result, not %v", tool, err)
	}
	return r
}

var startedRE = regexp.MustCompile(`started (job-\d+) \(pid (\d+)\)`)

// background starts command as a job and returns its id and pid.
func (a *agent) background(command string) (string, int) {
	a.t.Helper()
	r := a.call("bash", map[string]any{"command": command, "background": true})
	m := startedRE.FindStringSubmatch(r.Content)
	if r.IsError || m == nil {
		a.t.Fatalf("the job did not start: %+v", r)
	}
	pid, _ := strconv.Atoi(m[2])
	return m[1], pid
}

// outputUntil polls job_output until the output read so far contains
// want, and returns it all.
func (a *agent) outputUntil(id, want string) string {
	a.t.Helper()
	var all strings.Builder
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := a.call("job_output", map[string]any{"id": id, "wait": 2})
		if r.IsError {
			a.t.Fatalf("job_output: %+v", r)
		}
		all.WriteString(r.Content + "\n")
		if strings.Contains(all.String(), want) {
			return all.String()
		}
	}
	a.t.Fatalf("job %s never wrote %q; it wrote:\n%s", id, want, all.String())
	return ""
}

// groupAlive reports whether a process that is not a zombie is in group
// pgid: /proc is read, since kill(-pgid, 0) also finds zombies nobody
// reaped yet.
func groupAlive(pgid int) bool {
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

func waitGroupGone(t *testing.T, pgid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: process group %d is still running", what, pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var portRE = regexp.MustCompile(`port (\d+)`)

// TestADevServerIsStartedPolledAndKilled: python's HTTP server as a job;
// the call returns at once, job_output shows it listening and then the
// request it served, job_kill ends its whole group.
func TestADevServerIsStartedPolledAndKilled(t *testing.T) {
	a := start(t, withJobs(nil))
	os.WriteFile(filepath.Join(a.ws, "index.html"), []byte("hello from the job"), 0o644)
	begin := time.Now()
	id, pid := a.background("python3 -u -m http.server 0 --bind 127.0.0.1")
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("starting the job took %s; bash with background must return at once", took)
	}
	out := a.outputUntil(id, "Serving HTTP")
	m := portRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no port in %q", out)
	}
	if !strings.Contains(out, id+" is running (pid "+strconv.Itoa(pid)) {
		t.Fatalf("job_output must say the job runs: %q", out)
	}
	resp, err := http.Get("http://127.0.0.1:" + m[1] + "/index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from the job" {
		t.Fatalf("the dev server answered %q", body)
	}
	a.outputUntil(id, "GET /index.html")

	list := a.call("job_list", map[string]any{})
	if !strings.Contains(list.Content, id+"  running, pid "+strconv.Itoa(pid)) || !strings.Contains(list.Content, "http.server") {
		t.Fatalf("job_list: %q", list.Content)
	}
	if got := jobs.Of(a.root).List(""); len(got) != 1 || got[0].ID != id || !got[0].Running || got[0].Pid != pid {
		t.Fatalf("the tree's job table lists %+v", got)
	}

	r := a.call("job_kill", map[string]any{"id": id})
	if r.IsError || !strings.HasSuffix(r.Content, id+" ended: killed by job_kill") {
		t.Fatalf("job_kill: %+v", r)
	}
	waitGroupGone(t, pid, "the killed dev server")
	if got := jobs.Of(a.root).List(""); len(got) != 1 || got[0].Running || got[0].Status != "killed by job_kill" {
		t.Fatalf("after the kill the table lists %+v", got)
	}
	if r := a.call("job_input", map[string]any{"id": id, "input": "x"}); !r.IsError || !strings.Contains(r.Content, "has ended") {
		t.Fatalf("input to an ended job: %+v", r)
	}
}

// TestJobInputFeedsAReadLoop: a read loop answers each line written with
// job_input, and ends when its stdin is closed.
func TestJobInputFeedsAReadLoop(t *testing.T) {
	a := start(t, withJobs(nil))
	id, _ := a.background(`while read -r line; do echo "got: $line"; done; echo "stdin closed"; exit 7`)
	r := a.call("job_input", map[string]any{"id": id, "input": "ping\n"})
	if r.IsError || !strings.Contains(r.Content, "wrote 5 bytes") {
		t.Fatalf("job_input: %+v", r)
	}
	a.outputUntil(id, "got: ping")
	r = a.call("job_input", map[string]any{"id": id, "input": "last\n", "close": true})
	if r.IsError || !strings.Contains(r.Content, "stdin is now closed") {
		t.Fatalf("job_input with close: %+v", r)
	}
	out := a.outputUntil(id, id+" ended: exit code: 7")
	if !strings.Contains(out, "got: last\n") || !strings.Contains(out, "stdin closed\n") || strings.Count(out, "got: ping") != 0 {
		t.Fatalf("the loop's last output: %q", out)
	}
	if r := a.call("job_input", map[string]any{"id": id, "input": "x"}); !r.IsError {
		t.Fatalf("input after the end must fail: %+v", r)
	}
}

// TestOutputIsReadOnceAndBounded: each job_output returns only what is
// new; a read is bounded by max_output_bytes and says how much waits;
// what the ring lost before it was read is counted.
func TestOutputIsReadOnceAndBounded(t *testing.T) {
	a := start(t, withJobs(func(c *bash.Config) {
		c.MaxOutputBytes = 1000
		c.Jobs.BufferBytes = 4096
	}))
	id, _ := a.background(`echo first; read -r _; head -c 10000 /dev/zero | tr '\0' x; echo; echo tail-end`)
	out := a.outputUntil(id, "first")
	if strings.Count(out, "first") != 1 {
		t.Fatalf("%q", out)
	}
	if r := a.call("job_output", map[string]any{"id": id}); !strings.HasPrefix(r.Content, "(no new output)\n"+id+" is running") {
		t.Fatalf("a second read with nothing new: %q", r.Content)
	}
	a.call("job_input", map[string]any{"id": id, "input": "go\n"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		in := jobs.Of(a.root).List("")
		if len(in) == 1 && !in[0].Running {
			if in[0].OutputBytes != 6+10000+1+9 || in[0].Dropped == 0 || in[0].ExitCode == nil || *in[0].ExitCode != 0 {
				t.Fatalf("the table: %+v", in[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := a.call("job_output", map[string]any{"id": id})
	dropped := 10016 - 4096 - 6 // "first\n" was read
	if !strings.HasPrefix(r.Content, fmt.Sprintf("[%d bytes of output were dropped unread", dropped)) ||
		!strings.Contains(r.Content, "[3096 more bytes of output wait: call job_output again]") {
		t.Fatalf("the first read after the loss: %q", r.Content)
	}
	for _, more := range []int{2096, 1096, 96} {
		if r = a.call("job_output", map[string]any{"id": id}); !strings.Contains(r.Content, fmt.Sprintf("\n[%d more bytes", more)) {
			t.Fatalf("a read before the last says %d more bytes wait: %q", more, r.Content)
		}
	}
	r = a.call("job_output", map[string]any{"id": id})
	if !strings.HasSuffix(r.Content, "x\ntail-end\n"+id+" ended: exit code: 0") {
		t.Fatalf("the last read: %q", r.Content)
	}
}

// TestTheRunningCapAndUnknownIDs: max_running jobs at once, a clear error
// past it and for an id that does not exist.
func TestTheRunningCapAndUnknownIDs(t *testing.T) {
	a := start(t, withJobs(func(c *bash.Config) { c.Jobs.MaxRunning = 1 }))
	id, _ := a.background("sleep 300")
	r := a.call("bash", map[string]any{"command": "sleep 300", "background": true})
	if !r.IsError || !strings.Contains(r.Content, "jobs.max_running") {
		t.Fatalf("a job past the cap: %+v", r)
	}
	r = a.call("job_output", map[string]any{"id": "job-9"})
	if !r.IsError || !strings.Contains(r.Content, `no job "job-9"`) || !strings.Contains(r.Content, id) {
		t.Fatalf("an unknown id: %+v", r)
	}
	a.call("job_kill", map[string]any{"id": id})
	a.background("true") // the killed job no longer counts
}

// TestATimeoutKillsAJob: a job given a timeout is killed after it, and
// its output says so.
func TestATimeoutKillsAJob(t *testing.T) {
	a := start(t, withJobs(nil))
	r := a.call("bash", map[string]any{"command": "echo up; sleep 300", "background": true, "timeout": 1})
	m := startedRE.FindStringSubmatch(r.Content)
	if m == nil {
		t.Fatalf("%+v", r)
	}
	pid, _ := strconv.Atoi(m[2])
	a.outputUntil(m[1], "ended: killed: it timed out after 1s")
	waitGroupGone(t, pid, "the timed-out job")
}

// TestDisposalKillsEveryJob: the plugin's end (the session closed, dsh
// exits) kills every job's whole group and leaves no goroutine.
func TestDisposalKillsEveryJob(t *testing.T) {
	a := start(t, withJobs(nil))
	_, pid1 := a.background("sleep 300 & sleep 301; wait")
	_, pid2 := a.background("trap '' TERM; sleep 302")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	if err := a.root.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, pid1, "job 1 after the plugin's end")
	waitGroupGone(t, pid2, "job 2 (ignoring SIGTERM) after the plugin's end")
}

// TestAJobRunsInTheSandbox: with the sandbox on, a job cannot write
// outside the workspace and is killed with its group.
func TestAJobRunsInTheSandbox(t *testing.T) {
	cfg := isolated(t, func(c *bash.Config) { c.Jobs.Enabled = true })
	a := start(t, cfg)
	outside := filepath.Join(t.TempDir(), "outside")
	id, pid := a.background("touch " + outside + " 2>&1; echo wrote; touch inside && echo inside ok; sleep 300")
	out := a.outputUntil(id, "inside ok")
	if _, err := os.Stat(outside); err == nil {
		t.Fatalf("a sandboxed job wrote outside the workspace: %q", out)
	}
	if _, err := os.Stat(filepath.Join(a.ws, "inside")); err != nil {
		t.Fatalf("the job could not write its workspace: %q", out)
	}
	a.call("job_kill", map[string]any{"id": id})
	waitGroupGone(t, pid, "the sandboxed job")
}

// TestJobsOffMeansNoTools: without jobs.enabled nothing of it shows.
func TestJobsOffMeansNoTools(t *testing.T) {
	a := start(t, open(nil))
	if a.svc.Lookup(a.root, "job_output") != nil || strings.Contains(string(a.svc.Lookup(a.root, "bash").Parameters), "background") {
		t.Fatal("jobs are off by default")
	}
	b := start(t, withJobs(nil))
	for _, name := range []string{"job_output", "job_input", "job_kill", "job_list"} {
		if b.svc.Lookup(b.root, name) == nil {
			t.Fatalf("%s is not registered", name)
		}
	}
	if b.svc.Lookup(b.root, "job_input").Approval != tools.Ask {
		t.Fatal("job_input runs input through a shell: it must ask like bash")
	}
}
