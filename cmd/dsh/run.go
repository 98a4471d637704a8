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
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
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
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd, g, f) },
	}
	cmd.Flags().StringVarP(&f.prompt, "prompt", "p", "", "send this prompt, print the answer and exit")
	cmd.Flags().StringVar(&f.agentID, "agent", "", "the agent to talk to (default the first configured)")
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
	// The host starts no agent of its own: the one dsh talks to is a
	// session of the session controller.
	h, err := host.Start(cfg, host.Options{LogOutput: stderr})
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
	s, resumed, err := openResumable(stdctx.Background(), h, ac)
	if err != nil {
		return openFailure(ac, err)
	}
	cur := newCurrent(cfg, ac, s)
	defer func() {
		// Closing the session ends its agent: its turn, its closing
		// turn/end on disk. A failure there fails the run.
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		if err := cur.get().Detach(ctx); err != nil {
			fmt.Fprintln(stderr, "dsh: shutdown:", err)
			if runErr == nil {
				runErr = &exitCode{code: exitError}
			}
		}
	}()
	agent := s.Agent()
	if f.approvals.yolo {
		fmt.Fprintln(stderr, "dsh: warning: --yolo: every tool call a policy asks about runs without asking; deny rules still hold")
	}
	warnUnknownAllow(h, agent.ID(), f.approvals, stderr)

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)

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
			reportOpened(s, ac.ID, resumed, out)
		}
		code := headless(h, s, prompt, parts, f.json, f.echo, f.approvals, out, stderr, signals)
		reportSessionID(s.ID(), stored, stderr)
		reportUsage(h.Config(), ac, s, f.json, out, stderr)
		reportCut(out, stderr, s.ID())
		if code != exitOK {
			return &exitCode{code: code}
		}
		return nil
	}
	defer func() {
		reportSessionID(cur.get().ID(), h.Config().Persists(cur.get().AgentName()), stderr)
		reportSessionUsage(h, cur, stderr)
	}()
	return interactive(h, cur, stdin, stdout, stderr, signals, f.approvals, f.echo)
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

// tracker follows one agent's session: it renders events and tells when
// the turn of a given message ended.
type tracker struct {
	out, diag io.Writer
	json      bool
	// dim shows reasoning dimmed, for a terminal.
	dim bool
	// echo bounds what is shown of a call's arguments and result: a model
	// may send a megabyte of arguments, a tool may answer with as much.
	echo int

	mu       sync.Mutex
	turnOf   map[string]int        // message id → turn
	ended    map[int]session.Event // turn → its turn/end
	running  bool
	changed  chan struct{}
	lastText byte
	thinking bool // a reasoning line is open on diag
}

func newTracker(out, diag io.Writer, jsonOut bool) *tracker {
	return &tracker{out: out, diag: diag, json: jsonOut, echo: defaultEcho, turnOf: map[string]int{}, ended: map[int]session.Event{}, changed: make(chan struct{})}
}

// follow subscribes t to the agent's session events and, for the text
// output, to its stream chunks, which are not session events.
func (t *tracker) follow(agent agents.Agent) (off func(), err error) {
	offLog, err := session.EventAppended.On(agent.Context(), t.listen)
	if err != nil || t.json {
		return offLog, err
	}
	offChunks, err := agentloop.EventStreamChunk.On(agent.Context(), t.chunk)
	if err != nil {
		offLog()
		return nil, err
	}
	offCompact, err := followCompactions(agent, t.diag)
	if err != nil {
		offChunks()
		offLog()
		return nil, err
	}
	return func() { offCompact(); offChunks(); offLog() }, nil
}

// chunk streams the answer to out and the reasoning to diag.
func (t *tracker) chunk(_ stdctx.Context, c agentloop.StreamChunk) error {
	if c.Chunk.Text == "" {
		return nil
	}
	switch c.Chunk.Kind {
	case llm.ChunkText:
		// On a terminal both streams share the screen: the answer starts
		// on a line of its own, below the reasoning.
		t.endReasoning()
		io.WriteString(t.out, c.Chunk.Text)
		t.mu.Lock()
		t.lastText = c.Chunk.Text[len(c.Chunk.Text)-1]
		t.mu.Unlock()
	case llm.ChunkReasoning:
		t.reasoning(c.Chunk.Text)
	}
	return nil
}

func (t *tracker) listen(_ stdctx.Context, a session.Appended) error {
	e := a.Event
	if t.json {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		t.out.Write(append(b, '\n'))
	} else {
		t.render(e)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Type {
	case session.TurnStart:
		t.running = true
	case session.UserMessage, session.SteeringMessage:
		if e.Message != nil {
			t.turnOf[e.Message.ID] = e.Turn
		}
	case session.TurnEnd:
		t.running = false
		t.ended[e.Turn] = e
	}
	close(t.changed)
	t.changed = make(chan struct{})
	return nil
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
	case session.TurnEnd:
		t.endLine()
		t.endReasoning()
		if e.Error != "" {
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
	if e.Reason == "closed" {
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

// endOf returns the turn/end of the turn that took message id, if it ended.
func (t *tracker) endOf(id string) (session.Event, bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	turn, started := t.turnOf[id]
	if started {
		if e, ok := t.ended[turn]; ok {
			return e, true, t.changed
		}
	}
	return session.Event{}, false, t.changed
}

func (t *tracker) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// headless sends one prompt and waits for its turn to end.
func headless(h *host.Host, s *sessions.Session, text string, parts []llm.Part, jsonOut bool, echo int, flags approvalFlags, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	var mu sync.Mutex
	out, diag := syncWriter{&mu, stdout}, syncWriter{&mu, stderr}
	t := newTracker(out, diag, jsonOut)
	t.echo = echo
	t.dim = colorful(stderr)
	agent := s.Agent()
	off, err := t.follow(agent)
	if err != nil {
		fmt.Fprintln(stderr, "dsh:", err)
		return exitError
	}
	defer off()
	reportInterrupted(agent, jsonOut, out, diag)
	detach, err := attachAnswerer(h, agent.ID(), headlessAnswerer(flags, approvalNotifier(jsonOut, out, diag)))
	if err != nil {
		fmt.Fprintf(stderr, "dsh: agent %s: cannot attach the headless approval answerer: %v\n", agent.ID(), err)
		return exitError
	}
	defer detach()

	type delivered struct {
		id  string
		err error
	}
	done := make(chan delivered, 1)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	go func() {
		id, err := prompt(ctx, s, agentcontroller.Followup, text, parts)
		done <- delivered{id, err}
	}()

	var id string
	interrupted := false
	for id == "" {
		select {
		case d := <-done:
			if d.err != nil {
				if refused(d.err, diag, "") {
					return exitRefused
				}
				if interrupted {
					return exitInterrupted
				}
				fmt.Fprintln(diag, "dsh:", d.err)
				return exitError
			}
			id = d.id
		case <-signals:
			if interrupted {
				return exitInterrupted
			}
			interrupted = true
			cancel()
		}
	}
	for {
		e, ok, changed := t.endOf(id)
		if ok {
			return exitFor(e, interrupted)
		}
		select {
		case <-changed:
		case <-signals:
			if interrupted {
				return exitInterrupted
			}
			interrupted = true
			// A turn that had not started is dropped and never ends.
			go func() {
				s.Cancel(sessions.WithActor(stdctx.Background(), "Ctrl-C in dsh run"))
				t.mu.Lock()
				close(t.changed)
				t.changed = make(chan struct{})
				t.mu.Unlock()
			}()
		}
		if interrupted && agent.Status() != agents.StatusRunning {
			if e, ok, _ := t.endOf(id); ok {
				return exitFor(e, true)
			}
			if agent.Pending() == 0 && agent.Status() == agents.StatusIdle {
				return exitInterrupted
			}
		}
	}
}

func exitFor(end session.Event, interrupted bool) int {
	switch end.Reason {
	case "completed":
		return exitOK
	case "max-tokens":
		return exitMaxTokens
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
func reportInterrupted(agent agents.Agent, jsonOut bool, out, diag io.Writer) {
	in, ok := agent.Session().Interrupted()
	if !ok {
		return
	}
	if jsonOut {
		line := map[string]any{"type": "session/interrupted", "session": agent.Session().ID(), "session_id": agent.Session().ID(), "turn": in.Turn}
		if in.HasPrompt {
			line["prompt"] = in.Prompt
		}
		if b, err := json.Marshal(line); err == nil {
			out.Write(append(b, '\n'))
		}
		return
	}
	text, _ := interruption(agent)
	fmt.Fprintf(diag, "dsh: %s\n", text)
}

// interruption says that the resumed session's last turn was interrupted
// and which prompt it held; ok is false when it was not.
func interruption(agent agents.Agent) (text string, ok bool) {
	in, ok := agent.Session().Interrupted()
	if !ok {
		return "", false
	}
	if !in.HasPrompt {
		return fmt.Sprintf("the last turn (%d) of session %s was interrupted before its prompt was recorded", in.Turn, agent.Session().ID()), true
	}
	return fmt.Sprintf("the last turn (%d) of session %s was interrupted; its prompt was %q", in.Turn, agent.Session().ID(), in.Prompt.Content), true
}
