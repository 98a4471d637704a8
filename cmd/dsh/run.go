package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/spf13/cobra"
)

type runFlags struct {
	prompt    string
	agentID   string
	json      bool
	watch     bool
	approvals approvalFlags
	// session is --session: the stored session to continue (or create).
	session string
	// continueLast is --continue: the agent's most recent session.
	continueLast bool
	// attach are the files --attach adds to the prompt.
	attach []string
	// echo is --echo-bytes: how much of a tool call's arguments and of
	// its result the text output shows.
	echo int
	// command is --command: the prompt command to run (command.go).
	command string
	// goal is --goal: drive a goal headless (goal.go).
	goal string
}

func runCommand(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the configured agents: one prompt (-p or stdin) or an interactive session",
		Long: `Run builds the tree from the config, starts the agents and talks to one of them.

With -p, or a prompt piped on stdin, it sends the prompt, streams the answer to
stdout (tool calls and reasoning to stderr) and exits when the turn ends:
0 completed, 1 failed, 3 refused by admission, 4 token limit, 130 interrupted.
A reader that closes stdout early (| head -1) changes none of that: dsh stops
printing, says so on stderr, and the turn runs to its end and is saved.
On a terminal it opens an interactive session; type /help there.

When a policy asks whether a tool call may run, the interactive session asks
you (y allow once, a allow for this session, n deny). A headless run never
waits for a person: it denies, unless --allow TOOL or --yolo answered first.
A policy's deny rules stay denials under both flags.

--session ID continues the stored session ID, with the agent that wrote it,
or starts it under that id when none is stored (as an agent's session: key
in the config does). --continue takes the chosen agent's most recently
updated session; with none stored it exits 5. Both need a plugin that
persists sessions, such as session.jsonl. A session open in another dsh is
refused (exit 1) and left untouched. Every run ends with its session id on
stderr; with --json the first line is {"type":"session/opened",...}.`,
		Args: cobra.ArbitraryArgs, // only with --command (commandPrompt)
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.commandPrompt(cmd, args); err != nil {
				return err
			}
			return run(cmd, g, f)
		},
	}
	cmd.Flags().StringVarP(&f.prompt, "prompt", "p", "", "send this prompt, print the answer and exit")
	cmd.Flags().StringVar(&f.agentID, "agent", "", "the agent to talk to (default the first configured)")
	cmd.Flags().StringVar(&f.command, "command", "", "send the prompt command NAME (a .claude/commands file) with the arguments that follow, as /NAME ARGS")
	cmd.Flags().StringVar(&f.goal, "goal", "", "work toward this goal (with /goal's budget flags, or \"resume\") until it ends; exit 0 when complete")
	cmd.Flags().BoolVar(&f.json, "json", false, "write the session events as JSON lines instead of the answer")
	cmd.Flags().StringArrayVar(&f.attach, "attach", nil, "attach this file to the prompt: an image, a PDF or a text file (repeatable; with -p or stdin)")
	cmd.Flags().IntVar(&f.echo, "echo-bytes", defaultEcho, "show at most this many bytes of a tool call's arguments and of its result")
	cmd.Flags().BoolVar(&f.watch, "watch", false, "reload the config when the file changes")
	cmd.Flags().StringVar(&f.session, "session", "", "continue the stored session with this id, or start one under it")
	cmd.Flags().BoolVarP(&f.continueLast, "continue", "c", false, "continue the agent's most recently updated session")
	cmd.Flags().StringArrayVar(&f.approvals.allow, "allow", nil, "allow the calls of this tool that a policy asks about, e.g. --allow bash (repeatable)")
	cmd.Flags().BoolVar(&f.approvals.yolo, "yolo", false, "allow every call a policy asks about, without asking (deny rules still hold)")
	cmd.Flags().BoolVar(&f.approvals.yolo, "dangerously-skip-approvals", false, "the same as --yolo")
	return cmd
}

func run(cmd *cobra.Command, g *globals, f *runFlags) (runErr error) {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if cmd.Flags().Changed("prompt") && strings.TrimSpace(f.prompt) == "" {
		return &exitCode{code: exitUsage, err: fmt.Errorf("-p was given an empty prompt; pass the text to send, e.g. -p \"hello\", or leave -p out for an interactive session on a terminal")}
	}
	if err := f.approvals.check(); err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	if err := f.checkGoal(); err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	pinned := f.continueLast || cmd.Flags().Changed("session")
	if err := checkSessionFlags(f, cmd.Flags().Changed("session")); err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	opts := g.loadOptions()
	cfg, err := config.Load(opts)
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	if pinned && !slices.ContainsFunc(cfg.AgentIDs(), func(id string) bool { return cfg.Persists(id) }) {
		return &exitCode{code: exitUsage, err: noStoreError(flagName(f))}
	}
	ac, err := pickAgentConfig(cfg, f.agentID)
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	// The files are read before anything starts: a missing or oversized
	// one is a usage error that costs nothing.
	if len(f.attach) > 0 && f.prompt == "" && isTerminal(cmd.InOrStdin()) {
		return &exitCode{code: exitUsage, err: fmt.Errorf("--attach goes with a prompt (-p or stdin); in an interactive session, mention workspace files in a line with @path")}
	}
	parts, err := attachFiles(f.attach, cfg.Attachments)
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	// An interactive session shares the terminal with the logs: unless
	// the config or --log-level asks for more, only warnings reach it.
	interactiveRun := f.prompt == "" && isTerminal(cmd.InOrStdin())
	if interactiveRun && cfg.Log.Level == "" {
		cfg.Log.Level = "warn"
	}
	logs := &logSink{w: stderr}
	// The host starts no agent of its own: the one dsh talks to is a
	// session of the session controller.
	h, err := host.Start(cfg, host.Options{LogOutput: logs})
	if err != nil {
		return &exitCode{code: exitError, err: err}
	}
	defer func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			// What could not be persisted at shutdown fails the run, even
			// when the turn itself completed.
			fmt.Fprintln(stderr, "dsh: shutdown:", err)
			if runErr == nil {
				runErr = &exitCode{code: exitError}
			}
		}
	}()
	if pinned {
		if ac, err = chooseSession(stdctx.Background(), h, cfg, f); err != nil {
			return err
		}
		// A reload reads the config again: the chosen session stays the
		// agent's session: key there too, so reopening keeps it.
		opts.Sets = append(opts.Sets, fmt.Sprintf("agents.%s.session=%s", ac.ID, ac.Session))
	}
	if f.watch {
		stop := watch(h, opts, time.Second/2)
		defer stop()
	}
	svc := sessions.Service(h.Sessions())
	info, resumed, err := openResumable(stdctx.Background(), svc, ac)
	if err != nil {
		return openFailure(ac, err)
	}
	cur := newCurrent(svc, cfg, ac, info)
	defer func() {
		// Closing the session ends its agent: its turn, its closing
		// turn/end on disk. A failure there fails the run.
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Close(ctx, cur.id()); err != nil && !errs.HasCode(err, sessions.NotFound) {
			fmt.Fprintln(stderr, "dsh: shutdown:", err)
			if runErr == nil {
				runErr = &exitCode{code: exitError}
			}
		}
	}()
	if f.approvals.yolo {
		fmt.Fprintln(stderr, "dsh: warning: --yolo: every tool call a policy asks about runs without asking; deny rules still hold")
	}
	warnUnknownAllow(info, f.approvals, stderr)

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)

	if f.goal != "" {
		return runGoal(h, svc, info, ac, f, stdout, stderr, signals)
	}
	stdin := cmd.InOrStdin()
	prompt := f.prompt
	if prompt == "" && !isTerminal(stdin) {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return &exitCode{code: exitUsage, err: fmt.Errorf("reading the prompt from stdin: %w", err)}
		}
		prompt = strings.TrimSpace(string(b))
		if prompt == "" {
			return &exitCode{code: exitUsage, err: fmt.Errorf("no prompt: pass -p \"...\" or pipe one on stdin")}
		}
	}
	stored := cfg.Persists(ac.ID)
	if prompt != "" {
		// A reader that stops early ends the printing, not the run: the
		// exit code stays the turn's (see the command's help).
		defer catchSIGPIPE()()
		out := newCutWriter(stdout)
		if f.json {
			reportOpened(info, ac.ID, resumed, out)
		}
		code := headless(h, svc, info, prompt, parts, f.json, f.echo, f.approvals, out, stderr, signals)
		reportSessionID(info.ID, stored, stderr)
		reportUsage(h.Config(), ac, svc, info.ID, f.json, out, stderr)
		reportCut(out, stderr, info.ID)
		if code != exitOK {
			return &exitCode{code: code}
		}
		return nil
	}
	defer func() {
		reportSessionID(cur.id(), h.Config().Persists(cur.get().Agent), stderr)
		reportSessionUsage(h, cur, stderr)
	}()
	return interactiveLogged(h, cur, stdin, stdout, stderr, signals, f.approvals, f.echo, logs)
}

// syncWriter serializes writes from the event listeners and the UI.
type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// tracker renders one session's stream: its durable events and, for the
// text output, the chunks of the answer being streamed.
type tracker struct {
	out, diag io.Writer
	json      bool
	// dim shows reasoning dimmed, for a terminal.
	dim bool
	// echo bounds what is shown of a call's arguments and result: a model
	// may send a megabyte of arguments, a tool may answer with as much.
	echo int
	// turnEnded, when set, is signalled at every turn's end.
	turnEnded chan<- struct{}
	// view, when set, renders for a person at a colour terminal
	// (render_view.go) in place of the plain text.
	view *termView

	mu       sync.Mutex
	running  bool
	last     int64 // the seq of the last event rendered
	changed  chan struct{}
	lastText byte
	thinking bool // a reasoning line is open on diag
	// The message being streamed: its id, the index of the next chunk
	// and how much of its text is on the screen, so a snapshot after a
	// re-attach prints only what was missed.
	streaming string
	nextChunk int
	shown     int
}

func newTracker(out, diag io.Writer, jsonOut bool) *tracker {
	return &tracker{out: out, diag: diag, json: jsonOut, echo: defaultEcho, changed: make(chan struct{})}
}

// update renders one update of the stream.
func (t *tracker) update(u sessions.Update) {
	switch u.Kind {
	case live.KindEvent:
		t.event(*u.Event)
	case live.KindChunk:
		if !t.json {
			t.chunk(u.Chunk)
		}
	case live.KindSnapshot:
		if !t.json {
			t.snapshot(u.Snapshot)
		}
	}
}

// chunk streams the answer to out and the reasoning to diag.
func (t *tracker) chunk(c live.Chunk) {
	t.mu.Lock()
	if c.MessageID != t.streaming {
		t.streaming, t.nextChunk, t.shown = c.MessageID, 0, 0
	}
	if c.Index < t.nextChunk {
		t.mu.Unlock()
		return
	}
	t.nextChunk = c.Index + 1
	if c.Chunk.Kind == llm.ChunkText {
		t.shown += len(c.Chunk.Text)
	}
	t.mu.Unlock()
	t.show(c.Chunk)
}

// snapshot prints what a re-attached stream missed of the message being
// streamed: the text beyond what is on the screen.
func (t *tracker) snapshot(s *live.Snapshot) {
	t.mu.Lock()
	if s.MessageID != t.streaming {
		t.streaming, t.nextChunk, t.shown = s.MessageID, 0, 0
	}
	missed := ""
	if s.Next > t.nextChunk && len(s.Message.Content) > t.shown {
		missed = s.Message.Content[t.shown:]
		t.shown = len(s.Message.Content)
	}
	t.nextChunk = max(t.nextChunk, s.Next)
	t.mu.Unlock()
	t.show(llm.Chunk{Kind: llm.ChunkText, Text: missed})
}

func (t *tracker) show(c llm.Chunk) {
	if c.Text == "" {
		return
	}
	if t.view != nil {
		t.view.chunk(c)
		return
	}
	switch c.Kind {
	case llm.ChunkText:
		// On a terminal both streams share the screen: the answer starts
		// on a line of its own, below the reasoning.
		t.endReasoning()
		io.WriteString(t.out, c.Text)
		t.mu.Lock()
		t.lastText = c.Text[len(c.Text)-1]
		t.mu.Unlock()
	case llm.ChunkReasoning:
		t.reasoning(c.Text)
	}
}

func (t *tracker) event(e session.Event) {
	switch {
	case t.json:
		if b, err := json.Marshal(e); err == nil {
			t.out.Write(append(b, '\n'))
		}
	case t.view != nil:
		t.view.event(e)
	default:
		t.render(e)
	}
	t.mu.Lock()
	switch e.Type {
	case session.TurnStart:
		t.running = true
	case session.TurnEnd:
		t.running = false
	}
	t.last = e.Seq
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	if e.Type == session.TurnEnd && t.turnEnded != nil {
		select {
		case t.turnEnded <- struct{}{}:
		default:
		}
	}
}

// seen is the seq of the last event rendered; next closes at the next.
func (t *tracker) seen() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *tracker) next() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

func (t *tracker) render(e session.Event) {
	switch e.Type {
	case session.StepStart:
		t.endLine() // each step's answer starts on its own line
		t.endReasoning()
	case session.ToolCall:
		t.endLine()
		t.endReasoning()
		fmt.Fprintf(t.diag, "→ %s %s\n", oneLine(e.ToolCall.Name, t.echo), oneLine(e.ToolCall.Arguments, t.echo))
	case session.ToolResult:
		mark := "←"
		if e.Message.IsError {
			mark = "← error:"
		}
		fmt.Fprintf(t.diag, "%s %s\n", mark, oneLine(e.Message.Content, t.echo))
	case session.Compacted:
		t.endLine()
		fmt.Fprintf(t.diag, "(%s)\n", e.Compaction)
	case session.PlanUpdated:
		if s := planEventText(e.Plan); s != "" {
			t.endLine()
			fmt.Fprint(t.diag, s)
		}
	case session.AssistantMessage:
		if e.Finish == session.FinishCut {
			// The streamed text stays on the screen and in the log.
			t.endLine()
			fmt.Fprintln(t.diag, "(answer stopped here)")
		}
	case session.MessageDropped:
		if e.Message == nil {
			break
		}
		t.endLine()
		fmt.Fprintf(t.diag, "not delivered (%s): %s\n", droppedWhy(e), oneLine(e.Message.Content, 200))
	case session.GoalRecorded:
		t.endLine()
		io.WriteString(t.diag, goalEventLine(e))
	case session.TurnEnd:
		t.endLine()
		t.endReasoning()
		switch {
		case e.Reason == sessions.EndBudget:
			fmt.Fprintf(t.diag, "turn stopped: %s\n", e.Error)
		case e.Error != "":
			fmt.Fprintf(t.diag, "turn failed: %s\n", e.Error)
		}
	}
}

// reasoning writes a reasoning chunk on its own lines, dimmed on a
// terminal. Each chunk carries its own reset, so an interrupted stream never
// leaves the terminal dim.
func (t *tracker) reasoning(text string) {
	t.endLine()
	open := !strings.HasSuffix(text, "\n")
	if t.dim {
		text = "\x1b[2m" + text + "\x1b[0m"
	}
	io.WriteString(t.diag, text)
	t.mu.Lock()
	t.thinking = open
	t.mu.Unlock()
}

// endReasoning ends the reasoning's line, if one is open.
func (t *tracker) endReasoning() {
	t.mu.Lock()
	open := t.thinking
	t.thinking = false
	t.mu.Unlock()
	if open {
		io.WriteString(t.diag, "\n")
	}
}

// endLine ends the answer's current line, if it has one open.
func (t *tracker) endLine() {
	t.mu.Lock()
	open := t.lastText != 0 && t.lastText != '\n'
	t.lastText = 0
	t.mu.Unlock()
	if open {
		io.WriteString(t.out, "\n")
	}
}

// droppedWhy says why a message/dropped event's message never ran.
func droppedWhy(e session.Event) string {
	if e.Reason == session.DroppedClosed {
		return "the session was closed"
	}
	return "dropped: " + e.By + " cancelled the turn"
}

func oneLine(s string, n int) string {
	if len(s) > n {
		// Cut before replacing: s may be megabytes long.
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// defaultEcho is --echo-bytes unset.
const defaultEcho = 200

func (t *tracker) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// headless sends one prompt and waits for the recorded outcome of its
// turn, rendering the session's stream meanwhile.
func headless(h *host.Host, svc sessions.Service, info sessions.Info, text string, parts []llm.Part, jsonOut bool, echo int, flags approvalFlags, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	var mu sync.Mutex
	out, diag := syncWriter{&mu, stdout}, syncWriter{&mu, stderr}
	t := newTracker(out, diag, jsonOut)
	t.echo = echo
	t.dim = colorful(stderr)
	reportInterrupted(info, jsonOut, out, diag)
	var answer approval.Answerer
	if answers(h) {
		answer = headlessAnswerer(flags, approvalNotifier(jsonOut, out, diag))
	}
	f, err := follow(svc, info.ID, t, answer)
	if err != nil {
		fmt.Fprintf(stderr, "dsh: session %s: cannot follow it: %v\n", info.ID, err)
		return exitError
	}
	defer f.stop()
	if !jsonOut {
		off, err := followCompactions(h, info.AgentID, diag)
		if err != nil {
			fmt.Fprintln(stderr, "dsh:", err)
			return exitError
		}
		defer off()
	}

	type result struct {
		turn sessions.Turn
		res  sessions.TurnResult
		err  error
	}
	done := make(chan result, 1)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	var accepted atomic.Bool
	go func() {
		turn, err := prompt(ctx, svc, info.ID, false, text, parts)
		if err != nil {
			done <- result{err: err}
			return
		}
		accepted.Store(true)
		res, err := turn.Wait(ctx)
		done <- result{turn, res, err}
	}()

	interrupted := false
	for {
		select {
		case r := <-done:
			switch {
			case r.err != nil && refused(r.err, diag, ""):
				return exitRefused
			case r.err != nil && interrupted:
				return exitInterrupted
			case r.err != nil:
				fmt.Fprintln(diag, "dsh:", r.err)
				return exitError
			}
			// What the outcome names is shown before the run ends.
			seq := r.res.Seq
			if r.res.End != nil {
				seq = r.res.End.Seq
			}
			f.until(seq, 5*time.Second)
			if r.res.End == nil {
				// Dropped by a cancel (a turn that had not started
				// never ends), refused or expired while it waited.
				if interrupted {
					return exitInterrupted
				}
				return exitError
			}
			return exitFor(*r.res.End, interrupted)
		case <-signals:
			if interrupted {
				return exitInterrupted
			}
			interrupted = true
			if !accepted.Load() {
				// Still in admission (held): abandon the delivery.
				cancel()
				continue
			}
			// Cancel the session's turn; the prompt's outcome (its turn
			// aborted, or dropped) still comes through Wait.
			go svc.Cancel(sessions.WithActor(stdctx.Background(), "Ctrl-C in dsh run"), info.ID)
		}
	}
}

func exitFor(end session.Event, interrupted bool) int {
	switch end.Reason {
	case "completed":
		return exitOK
	case "max-tokens":
		return exitMaxTokens
	case "budget":
		// A budget that ran out mid-turn is the refusal that comes late.
		return exitRefused
	case "aborted":
		if interrupted {
			return exitInterrupted
		}
	}
	return exitError
}

// reportInterrupted tells a headless caller that the resumed session's
// last turn was cut short — dsh was killed or stopped in the middle of it —
// and which prompt it held: on stderr as text, or with --json as one
// "session/interrupted" line on stdout ahead of the session events. It
// carries the id under "session_id" like the other session/ lines, and
// under "session" as it did first, for the scripts that read it there.
func reportInterrupted(info sessions.Info, jsonOut bool, out, diag io.Writer) {
	in := info.Interrupted
	if in == nil {
		return
	}
	if jsonOut {
		line := map[string]any{"type": "session/interrupted", "session": info.ID, "session_id": info.ID, "turn": in.Turn}
		if in.HasPrompt {
			line["prompt"] = in.Prompt
		}
		if b, err := json.Marshal(line); err == nil {
			out.Write(append(b, '\n'))
		}
		return
	}
	text, _ := interruption(info)
	fmt.Fprintf(diag, "dsh: %s\n", text)
}

// interruption says that the resumed session's last turn was interrupted
// and which prompt it held; ok is false when it was not.
func interruption(info sessions.Info) (text string, ok bool) {
	in := info.Interrupted
	if in == nil {
		return "", false
	}
	if !in.HasPrompt {
		return fmt.Sprintf("the last turn (%d) of session %s was interrupted before its prompt was recorded", in.Turn, info.ID), true
	}
	return fmt.Sprintf("the last turn (%d) of session %s was interrupted; its prompt was %q", in.Turn, info.ID, in.Prompt.Content), true
}
