package bash

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dsh-go/dsh/services/tools"
)

// Bounds of the job tools' arguments.
const (
	// maxWait bounds job_output's wait for new output.
	maxWait = 60
	// maxInput bounds one job_input's text.
	maxInput = 64 << 10
	// inputTimeout bounds a write to a job that does not read its stdin.
	inputTimeout = 5 * time.Second
)

// jobTools are the tools of the jobs a bash call started in the
// background.
func (m *jobManager) jobTools() []tools.Tool {
	idProp := map[string]any{"type": "string", "pattern": "^job-[0-9]+$", "description": "The job's id, as bash with background: true returned it (job-1)."}
	schema := func(props map[string]any, required ...string) json.RawMessage {
		if required == nil {
			required = []string{}
		}
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false})
		return b
	}
	return []tools.Tool{
		{
			Name: "job_output",
			Description: fmt.Sprintf("Returns a background job's output written since the last job_output of the job (stdout and stderr interleaved), at most %d bytes per call "+
				"(call again for the rest), then its state: running, or how it ended (exit code). With wait, waits up to that many seconds (at most %d) for new output or the end. "+
				"Only the job's latest %d bytes are kept: output older than that and not read yet is dropped, and the result says how much.",
				m.r.cfg.MaxOutputBytes, maxWait, m.cfg.BufferBytes),
			Parameters: schema(map[string]any{
				"id":   idProp,
				"wait": map[string]any{"type": "integer", "minimum": 0, "maximum": maxWait, "description": "Seconds to wait for new output or the job's end when there is none yet; default 0."},
			}, "id"),
			ParallelSafe: true,
			ReadOnly:     true,
			Execute:      m.output,
		},
		{
			Name:        "job_input",
			Description: fmt.Sprintf("Writes text to a background job's stdin (add \\n to end a line), at most %d bytes; with close: true closes its stdin afterwards (end of input). A job that does not read its stdin for %s fails the write.", maxInput, inputTimeout),
			Parameters: schema(map[string]any{
				"id":    idProp,
				"input": map[string]any{"type": "string", "maxLength": maxInput, "description": "The text to write."},
				"close": map[string]any{"type": "boolean", "description": "Close the job's stdin after writing."},
			}, "id", "input"),
			// Writing to a shell's stdin runs commands: asked about as
			// bash is.
			Approval: tools.Ask,
			Execute:  m.input,
		},
		{
			Name:        "job_kill",
			Description: fmt.Sprintf("Ends a background job and every process it started (SIGTERM, SIGKILL after %s) and returns its unread output, bounded as job_output's.", killGrace),
			Parameters:  schema(map[string]any{"id": idProp}, "id"),
			Execute:     m.killTool,
		},
		{
			Name:         "job_list",
			Description:  "Lists this session's background jobs: id, state, pid, unread output and command. Ended jobs stay listed (the last few) until their output is no longer needed.",
			Parameters:   schema(map[string]any{}),
			ParallelSafe: true,
			ReadOnly:     true,
			Execute:      m.listTool,
		},
	}
}

type jobArgs struct {
	ID    string `json:"id"`
	Wait  int    `json:"wait"`
	Input string `json:"input"`
	Close bool   `json:"close"`
}

// lookup decodes the arguments and finds the job, or says what is wrong.
func (m *jobManager) lookup(c tools.Call) (*job, jobArgs, *tools.Result) {
	var a jobArgs
	if err := json.Unmarshal(c.Arguments, &a); err != nil {
		r := errJob("the arguments are not a JSON object with an id: %v", err)
		return nil, a, &r
	}
	j := m.job(c.AgentID, a.ID)
	if j == nil {
		var ids []string
		for _, x := range m.list(c.AgentID) {
			ids = append(ids, x.id)
		}
		have := "there are none; start one with bash and background: true"
		if len(ids) > 0 {
			have = "this session's jobs are " + strings.Join(ids, ", ")
		}
		r := errJob("there is no job %q: %s", a.ID, have)
		return nil, a, &r
	}
	return j, a, nil
}

func (m *jobManager) output(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
	j, a, bad := m.lookup(c)
	if bad != nil {
		return *bad, nil
	}
	if a.Wait < 0 || a.Wait > maxWait {
		return errJob("wait is %d; give seconds from 0 to %d", a.Wait, maxWait), nil
	}
	if a.Wait > 0 {
		j.waitOutput(ctx, time.Duration(a.Wait)*time.Second)
	}
	return tools.Result{Content: j.read(m.r.cfg.MaxOutputBytes)}, nil
}

// waitOutput returns once j has unread output or ended, d passed, or ctx
// ended.
func (j *job) waitOutput(ctx stdctx.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		j.mu.Lock()
		ready := j.ended || j.out.total > j.readOff
		changed := j.changed
		j.mu.Unlock()
		if ready {
			return
		}
		select {
		case <-changed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// read returns j's unread output, at most max bytes, and its state.
func (j *job) read(max int) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	data, next, dropped := j.out.read(j.readOff, max, j.ended)
	j.readOff = next
	var b strings.Builder
	if dropped > 0 {
		fmt.Fprintf(&b, "[%d bytes of output were dropped unread: only the latest %d bytes are kept (tools.bash jobs.buffer_bytes); read more often]\n", dropped, j.out.size)
	}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	if text == "" {
		text = "(no new output)"
	}
	b.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	if more := j.out.total - next; more > 0 {
		fmt.Fprintf(&b, "[%d more bytes of output wait: call job_output again]\n", more)
	}
	if j.ended {
		fmt.Fprintf(&b, "%s ended: %s", j.id, j.status)
		j.seen = true
	} else {
		fmt.Fprintf(&b, "%s is running (pid %d, for %s)", j.id, j.proc.Pid(), time.Since(j.started).Round(time.Second))
	}
	return b.String()
}

func (m *jobManager) input(_ stdctx.Context, c tools.Call) (tools.Result, error) {
	j, a, bad := m.lookup(c)
	if bad != nil {
		return *bad, nil
	}
	if len(a.Input) > maxInput {
		return errJob("input is %d bytes; write at most %d per call", len(a.Input), maxInput), nil
	}
	j.mu.Lock()
	w, ended := j.stdin, j.ended
	j.mu.Unlock()
	switch {
	case ended:
		return errJob("%s has ended (%s); its stdin is closed", j.id, j.info().Status), nil
	case w == nil:
		return errJob("%s's stdin was closed by an earlier job_input with close: true", j.id), nil
	}
	// A pipe's write end honours deadlines: a job that never reads
	// cannot hold the call once the pipe's buffer is full.
	_ = w.SetWriteDeadline(time.Now().Add(inputTimeout))
	n, err := w.Write([]byte(a.Input))
	_ = w.SetWriteDeadline(time.Time{})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errJob("%s did not read its stdin within %s: %d of %d bytes were written", j.id, inputTimeout, n, len(a.Input)), nil
	case err != nil:
		return errJob("writing to %s's stdin failed after %d bytes: %v (the job may have closed it or ended)", j.id, n, err), nil
	}
	note := ""
	if a.Close {
		j.mu.Lock()
		if j.stdin != nil {
			j.stdin.Close()
			j.stdin = nil
		}
		j.mu.Unlock()
		note = "; its stdin is now closed"
	}
	return tools.Result{Content: fmt.Sprintf("wrote %d bytes to %s's stdin%s. Read its answer with job_output (wait lets it answer first).", n, j.id, note)}, nil
}

func (m *jobManager) killTool(_ stdctx.Context, c tools.Call) (tools.Result, error) {
	j, _, bad := m.lookup(c)
	if bad != nil {
		return *bad, nil
	}
	j.kill("killed by job_kill", true)
	return tools.Result{Content: j.read(m.r.cfg.MaxOutputBytes)}, nil
}

func (m *jobManager) listTool(_ stdctx.Context, c tools.Call) (tools.Result, error) {
	list := m.Jobs(c.AgentID)
	if len(list) == 0 {
		return tools.Result{Content: "no background jobs; start one with bash and background: true"}, nil
	}
	var b strings.Builder
	for _, in := range list {
		state := "running, pid " + fmt.Sprint(in.Pid)
		if !in.Running {
			state = "ended: " + in.Status
		}
		fmt.Fprintf(&b, "%s  %s  %d bytes unread  %s\n", in.ID, state, in.Unread, oneLine(in.Command))
	}
	return tools.Result{Content: strings.TrimRight(b.String(), "\n")}, nil
}
