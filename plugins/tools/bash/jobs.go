package bash

import (
	stdctx "context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/jobs"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// keepEnded is how many ended jobs an agent's list keeps, so their last
// output and status can still be read; the oldest go first.
const keepEnded = 16

// jobManager holds the background jobs of one plugin instance, by agent.
// Jobs are started like a command (the same sandbox, egress and
// environment), with stdin a pipe the model writes through job_input and
// output kept in a ring per job. They belong to their agent: its disposal
// (the session closed) kills them, the plugin's disposal (dsh exits, the
// preset is unmounted) kills all, and childproc's group watcher kills
// them when dsh dies without either (kill -9).
type jobManager struct {
	r   *runner
	cfg JobsConfig
	ctx *dshctx.Context
	// wakeCtx bounds the deliveries of jobs' ends; it ends with the plugin.
	wakeCtx  stdctx.Context
	stopWake stdctx.CancelFunc

	mu     sync.Mutex
	agents map[string]*agentJobs
	closed bool
	// sessions is the session service a job's end is reported through,
	// while the waker runs.
	sessions *sessions.Controller
	// wg counts the goroutines that watch jobs and deliver their ends.
	wg sync.WaitGroup
}

// agentJobs are one agent's jobs, oldest first.
type agentJobs struct {
	next     int
	starting int
	jobs     []*job
}

func newJobManager(r *runner, ctx *dshctx.Context) *jobManager {
	wctx, stop := stdctx.WithCancel(stdctx.Background())
	return &jobManager{r: r, cfg: r.cfg.Jobs, ctx: ctx, wakeCtx: wctx, stopWake: stop, agents: map[string]*agentJobs{}}
}

// job is one background command.
type job struct {
	m       *jobManager
	id      string
	agentID string
	command string
	started time.Time
	proc    *childproc.Proc
	// source is who a message about the job's end comes from.
	source agentcontroller.Source

	mu       sync.Mutex
	stdin    *os.File // the write end of its stdin; nil once closed
	out      *ring
	readOff  int64         // the offset job_output read up to
	changed  chan struct{} // closed and replaced at each write and at the end
	ended    bool
	endedAt  time.Time
	status   string
	exitCode *int
	// killedBy says who ended it, set before the kill; quiet kills (the
	// model's job_kill, the session's close) wake nobody.
	killedBy string
	quiet    bool
	// seen: the model was told the job ended (job_output, job_kill, or
	// the message of its end).
	seen bool
	done chan struct{}
}

// errJob is an error result about jobs.
func errJob(format string, a ...any) tools.Result { return errorResult(fmt.Sprintf(format, a...)) }

// start runs command in ws as a job of call's agent and answers at once.
// timeout, when positive, kills the job after that long.
func (m *jobManager) start(call tools.Call, command, ws string, timeout time.Duration) tools.Result {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errJob("background jobs are shutting down with tools.bash; run the command without background")
	}
	aj := m.agents[call.AgentID]
	if aj == nil {
		aj = &agentJobs{}
		m.agents[call.AgentID] = aj
	}
	running := aj.starting
	for _, j := range aj.jobs {
		if !j.isEnded() {
			running++
		}
	}
	if running >= m.cfg.MaxRunning {
		m.mu.Unlock()
		return errJob("%d background jobs run already, the most allowed (tools.bash jobs.max_running); end one with job_kill first, job_list lists them", running)
	}
	aj.next++
	aj.starting++
	id := fmt.Sprintf("job-%d", aj.next)
	m.mu.Unlock()
	started := false
	defer func() {
		if !started {
			m.mu.Lock()
			aj.starting--
			m.mu.Unlock()
		}
	}()

	tmp, err := os.MkdirTemp("", "dsh-job-")
	if err != nil {
		return errorResult("could not create the job's temp dir: " + err.Error() + "; check that dsh's TMPDIR is writable")
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		os.RemoveAll(tmp)
		return errorResult("could not create the job's stdin pipe: " + err.Error())
	}
	// The job's own group watcher, always: a job outlives many commands,
	// and its shell's children must not outlive a SIGKILLed dsh. In the
	// sandbox the PID namespace already dies with its first process
	// (Pdeathsig; the tests pass without the watcher there), and without
	// one the runner guards anyway; the watcher keeps that true whatever
	// the sandbox becomes, for one /bin/sh per job.
	p, entry, warning, problem := m.r.start(command, ws, tmp, spawn{stdin: stdinR, guard: true})
	stdinR.Close()
	if problem != "" {
		stdinW.Close()
		os.RemoveAll(tmp)
		return errorResult(problem)
	}
	var l net.Listener
	var served chan struct{}
	if m.r.proxied && entry != nil {
		if l, err = entry.Listener(); err != nil || l == nil {
			stdinW.Close()
			p.Stop(0)
			_ = p.Wait()
			p.out.Close()
			_ = entry.Err()
			os.RemoveAll(tmp)
			return errorResult(fmt.Sprintf("the job's egress proxy could not be set up, so it did not run: %v", msgOrNone(err)))
		}
		served = make(chan struct{})
		go func() {
			defer close(served)
			_ = m.r.egress.Serve(l)
		}()
	}
	j := &job{m: m, id: id, agentID: call.AgentID, command: command, started: time.Now(), proc: p.Proc,
		source: jobSource(call, id), stdin: stdinW, out: newRing(m.cfg.BufferBytes),
		changed: make(chan struct{}), done: make(chan struct{})}
	m.mu.Lock()
	closed := m.closed || m.agents[call.AgentID] != aj
	if !closed {
		aj.jobs = append(aj.jobs, j)
		aj.starting--
		started = true
		aj.evict()
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go j.run(p, entry, l, served, tmp, timeout)
	if closed {
		j.kill("killed: its agent or tools.bash ended while it started", true)
		return errJob("the job was killed as it started: its agent or tools.bash is ending")
	}

	var b strings.Builder
	b.WriteString(warning)
	fmt.Fprintf(&b, "started %s (pid %d) in the background: %s\n", id, p.Pid(), oneLine(command))
	if timeout > 0 {
		fmt.Fprintf(&b, "It is killed after %s. ", timeout)
	}
	b.WriteString("Read its output with job_output, write to its stdin with job_input, end it with job_kill; it is killed when the session closes.")
	if m.cfg.Wake == WakeOn {
		b.WriteString(" If it ends before you read its end, you are told in a message.")
	}
	return tools.Result{Content: b.String()}
}

// evict drops the oldest ended jobs beyond keepEnded.
func (aj *agentJobs) evict() {
	ended := 0
	for _, j := range aj.jobs {
		if j.isEnded() {
			ended++
		}
	}
	for i := 0; ended > keepEnded && i < len(aj.jobs); {
		if aj.jobs[i].isEnded() {
			aj.jobs = slices.Delete(aj.jobs, i, i+1)
			ended--
			continue
		}
		i++
	}
}

// jobSource is who a job's end speaks for: the job, on behalf of whoever
// is behind the turn that started it (that turn's first input's person,
// or the person that input acted for), unattended when that turn was.
func jobSource(call tools.Call, id string) agentcontroller.Source {
	src := agentcontroller.Source{Kind: agentcontroller.SourceJob, RPCID: call.ID, Unattended: call.Unattended,
		Entry: "job", Principal: agentcontroller.Principal{Kind: "job", ID: id}}
	if len(call.Sources) > 0 {
		first := call.Sources[0]
		behalf := first.Principal
		if first.OnBehalfOf != nil {
			behalf = *first.OnBehalfOf
		}
		src.Principal.Tenant = behalf.Tenant
		if !behalf.IsZero() {
			src.OnBehalfOf = &behalf
		}
	}
	return src
}

// oneLine is a command as a status line shows it.
func oneLine(command string) string {
	s := strings.Join(strings.Fields(command), " ")
	if len(s) > 120 {
		s = s[:completeRunes([]byte(s[:117]))] + "..."
	}
	return "`" + s + "`"
}

// run watches the job until it ends: its output into the ring, its exit,
// then the teardown of its group, its proxy and its temp dir.
func (j *job) run(p started, entry *sandbox.Entry, l net.Listener, served chan struct{}, tmp string, timeout time.Duration) {
	defer j.m.wg.Done()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(jobOutput{j}, p.out)
	}()
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { j.kill(fmt.Sprintf("killed: it timed out after %s", timeout), false) })
	}
	_ = p.Wait()
	if timer != nil {
		timer.Stop()
	}
	// The whole group goes with the job's shell, as after a command.
	p.Stop(killGrace)
	escaped := drain(p.out, copied)
	p.out.Close()
	var entryErr error
	if entry != nil {
		entryErr = entry.Err()
	}
	if l != nil {
		l.Close()
		<-served
	}
	os.RemoveAll(tmp)
	j.finish(p.Cmd.ProcessState, escaped, entryErr)
	j.m.ended(j)
}

// jobOutput writes a job's output into its ring.
type jobOutput struct{ j *job }

func (w jobOutput) Write(b []byte) (int, error) {
	w.j.mu.Lock()
	defer w.j.mu.Unlock()
	n, _ := w.j.out.Write(b)
	close(w.j.changed)
	w.j.changed = make(chan struct{})
	return n, nil
}

// finish records how the job ended.
func (j *job) finish(state *os.ProcessState, escaped bool, entryErr error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stdin != nil {
		j.stdin.Close()
		j.stdin = nil
	}
	switch {
	case entryErr != nil:
		j.status = msg(entryErr)
	case j.killedBy != "":
		j.status = j.killedBy
	case state == nil:
		j.status = "its exit status is unknown"
	case state.Exited():
		code := state.ExitCode()
		j.exitCode = &code
		j.status = fmt.Sprintf("exit code: %d", code)
	default:
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			j.status = fmt.Sprintf("killed by signal %s", ws.Signal())
		} else {
			j.status = state.String()
		}
	}
	if escaped {
		j.status += " (output still held open by a process that left the job's process group was not waited for)"
	}
	j.ended, j.endedAt = true, time.Now()
	close(j.changed)
	j.changed = make(chan struct{})
	close(j.done)
}

func (j *job) isEnded() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ended
}

// kill ends the job's whole group (SIGTERM, then SIGKILL after
// killGrace) and waits until it is gone. by says who, for its status;
// quiet means whoever killed it knows it ended.
func (j *job) kill(by string, quiet bool) {
	j.mu.Lock()
	if !j.ended && j.killedBy == "" {
		j.killedBy, j.quiet = by, quiet
	}
	j.mu.Unlock()
	j.proc.Stop(killGrace)
	<-j.done
}

// info describes the job for jobs.Info.
func (j *job) info() jobs.Info {
	j.mu.Lock()
	defer j.mu.Unlock()
	in := jobs.Info{ID: j.id, AgentID: j.agentID, Command: j.command, Pid: j.proc.Pid(), Started: j.started,
		Running: !j.ended, Ended: j.endedAt, Status: "running", ExitCode: j.exitCode,
		OutputBytes: j.out.total, Unread: j.out.total - max(j.readOff, j.out.oldest())}
	if j.readOff < j.out.oldest() {
		in.Dropped = j.out.oldest() - j.readOff
	}
	if j.ended {
		in.Status = j.status
	}
	return in
}

// job returns agentID's job id, or nil.
func (m *jobManager) job(agentID, id string) *job {
	m.mu.Lock()
	defer m.mu.Unlock()
	if aj := m.agents[agentID]; aj != nil {
		for _, j := range aj.jobs {
			if j.id == id {
				return j
			}
		}
	}
	return nil
}

// list returns agentID's jobs, oldest first.
func (m *jobManager) list(agentID string) []*job {
	m.mu.Lock()
	defer m.mu.Unlock()
	if aj := m.agents[agentID]; aj != nil {
		return slices.Clone(aj.jobs)
	}
	return nil
}

// Jobs is jobs.Source's listing.
func (m *jobManager) Jobs(agentID string) []jobs.Info {
	var out []jobs.Info
	for _, j := range m.list(agentID) {
		out = append(out, j.info())
	}
	return out
}

// Kill is jobs.Source's kill: a person ended the job, so its agent is
// told unless it reads the end first.
func (m *jobManager) Kill(agentID, id, by string) bool {
	j := m.job(agentID, id)
	if j == nil {
		return false
	}
	j.kill("killed by "+by, false)
	return true
}

// agentGone kills agentID's jobs: its session closed.
func (m *jobManager) agentGone(agentID string) {
	m.mu.Lock()
	aj := m.agents[agentID]
	delete(m.agents, agentID)
	m.mu.Unlock()
	if aj != nil {
		killAll(aj.jobs, "killed: its session closed")
	}
}

// close kills every job and waits for their watchers and deliveries.
func (m *jobManager) close() {
	m.mu.Lock()
	m.closed = true
	var all []*job
	for _, aj := range m.agents {
		all = append(all, aj.jobs...)
	}
	m.agents = map[string]*agentJobs{}
	m.mu.Unlock()
	m.stopWake()
	killAll(all, "killed: tools.bash stopped (its session closed or dsh exited)")
	m.wg.Wait()
}

// killAll kills jobs at once, each bounded by its own teardown.
func killAll(list []*job, by string) {
	var wg sync.WaitGroup
	for _, j := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.kill(by, true)
		}()
	}
	wg.Wait()
}

// mountJobs registers the job tools and ties the jobs to the plugin's
// life and to their agents'.
func (r *runner) mountJobs(ctx *dshctx.Context, svc *tools.Service) error {
	m := newJobManager(r, ctx)
	r.jobs = m
	// Registered first, so it runs last: after the tools are gone and
	// the agent listener is off, nothing starts a job any more.
	if _, err := ctx.OnDispose("tools.bash jobs", func() error { m.close(); return nil }); err != nil {
		m.close()
		return err
	}
	remove := jobs.Of(ctx).Add(m)
	if _, err := ctx.OnDispose("tools.bash jobs listing", func() error { remove(); return nil }); err != nil {
		remove()
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error {
		m.agentGone(a.ID())
		return nil
	}); err != nil {
		return err
	}
	for _, t := range m.jobTools() {
		if err := svc.Register(ctx, t); err != nil {
			return err
		}
	}
	if r.cfg.Jobs.Wake == WakeOn {
		if _, err := ctx.Plugin(waker, wakeWith{m}); err != nil {
			return err
		}
	}
	return nil
}
