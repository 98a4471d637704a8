package main

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"os/user"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/google/uuid"
)

// The CLI talks to its session through the session service, like every
// entry point: the host starts no agent of its own, and dsh run ensures
// the session it talks to, its agent under its configured id. It follows
// the session's stream (the live hub), never the agent's own events.

// cliSource is who the CLI's prompts come from: the OS user running dsh,
// through the cli entry point.
var cliSource = sessions.Source{Kind: sessions.SourceUser, RPCID: "cli", Entry: "cli", Principal: osUser()}

// osUser is the principal of the person running dsh: the OS user's login
// name ($USER when the user database has no entry, the uid as a last
// resort), so a policy can tell the owner's prompts from others'.
func osUser() sessions.Principal {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return sessions.Principal{Kind: "user", ID: u.Username}
	}
	if name := os.Getenv("USER"); name != "" {
		return sessions.Principal{Kind: "user", ID: name}
	}
	return sessions.Principal{Kind: "user", ID: strconv.Itoa(os.Getuid())}
}

// pickAgentConfig returns the configured agent id names, or the first one.
func pickAgentConfig(cfg *config.Config, id string) (config.AgentConfig, error) {
	if id != "" {
		ac, ok := cfg.Agent(id)
		if !ok {
			return config.AgentConfig{}, fmt.Errorf("no agent %q; configured agents: %s", id, strings.Join(cfg.AgentIDs(), ", "))
		}
		return ac, nil
	}
	if len(cfg.Agents) == 0 {
		return config.AgentConfig{}, fmt.Errorf("the config starts no agents; add one under the agents key")
	}
	return cfg.Agents[0], nil
}

// openSession opens the session of configured agent ac through the session
// service: its session: key is resumed when persisted and created under
// that id when not, as the host did for the config's agents; without one,
// a fresh session.
func openSession(ctx stdctx.Context, svc sessions.Service, ac config.AgentConfig) (sessions.Info, error) {
	in, _, err := openResumable(ctx, svc, ac)
	return in, err
}

// prompt sends text, with the files attached to it, to session id with a
// fresh request id; steer hands it to the running turn.
func prompt(ctx stdctx.Context, svc sessions.Service, id string, steer bool, text string, parts []llm.Part) (sessions.Turn, error) {
	r := sessions.PromptRequest{RequestID: "cli-" + uuid.NewString(), Content: text, Parts: parts, Source: cliSource}
	// Both go through the agent controller's admission.
	if steer {
		return svc.Steer(ctx, id, r)
	}
	return svc.Prompt(ctx, id, r)
}

// refused reports a refused prompt to diag (unless the refusing plugin
// presented it itself) and says whether err was a refusal.
func refused(err error, diag io.Writer, suffix string) bool {
	r, ok := sessions.RejectionOf(err)
	if !ok {
		return false
	}
	if !r.Presented {
		fmt.Fprintf(diag, "refused: %s\n%s", refusalText(err, sessions.Refusal{Message: r.Message}), suffix)
	}
	return true
}

// viewer reads one session's stream, as every client of a session does:
// the tracker renders it, and each approval question goes to answer, whose
// answer returns through the stream; a question settled elsewhere
// (withdrawn, or answered by another client) cancels the answer's ctx. The
// stream re-attaches itself when it falls behind.
type viewer struct {
	stream sessions.Stream
	t      *tracker
	cancel stdctx.CancelFunc
	done   chan struct{}
}

// follow attaches to session id from its end: the terminal shows what
// happens from now on, and answers approvals when answer is set.
func follow(svc sessions.Service, id string, t *tracker, answer approval.Answerer) (*viewer, error) {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	st, err := svc.Attach(ctx, id, sessions.AttachOptions{FromEnd: true, Approvals: answer != nil, Name: "terminal"})
	if err != nil {
		cancel()
		return nil, err
	}
	f := &viewer{stream: st, t: t, cancel: cancel, done: make(chan struct{})}
	go f.pump(ctx, answer)
	return f, nil
}

// stop detaches the stream and waits for the answers in flight to return.
func (f *viewer) stop() {
	f.cancel()
	<-f.done
}

// until waits, at most wait, for the stream to have rendered the event
// at seq: a turn's end is recorded before the hub sends it (once durable).
func (f *viewer) until(seq int64, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for f.t.seen() < seq && time.Now().Before(deadline) {
		select {
		case <-f.t.next():
		case <-f.done:
			return
		case <-time.After(time.Until(deadline)):
		}
	}
}

func (f *viewer) pump(ctx stdctx.Context, answer approval.Answerer) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[int64]stdctx.CancelFunc{}
	defer func() {
		mu.Lock()
		for _, cancel := range open {
			cancel()
		}
		mu.Unlock()
		wg.Wait()
		_ = f.stream.Close()
		close(f.done)
	}()
	for {
		u, err := f.stream.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errs.HasCode(err, live.HubClosed) {
				fmt.Fprintf(f.t.diag, "dsh: the session's stream ended: %v\n", err)
			}
			return
		}
		switch u.Kind {
		case live.KindQuestion:
			if answer == nil {
				continue
			}
			q := u.Question
			qctx, cancel := stdctx.WithCancel(ctx)
			mu.Lock()
			open[q.ID] = cancel
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				ans, err := answer(qctx, q.Request)
				mu.Lock()
				delete(open, q.ID)
				mu.Unlock()
				cancel()
				if err == nil {
					_ = f.stream.Answer(q.ID, ans)
				}
			}()
		case live.KindSettled:
			mu.Lock()
			if cancel, ok := open[u.Settled.QuestionID]; ok {
				cancel()
			}
			mu.Unlock()
		default:
			f.t.update(u)
		}
	}
}

// current is the session dsh talks to, with the settings its agent was
// opened with; an interactive session replaces it when a reload changes
// them, and the sender and shutdown read it.
type current struct {
	svc     sessions.Service
	mu      sync.Mutex
	info    sessions.Info
	ac      config.AgentConfig
	presets [][]config.Entry
}

func newCurrent(svc sessions.Service, cfg *config.Config, ac config.AgentConfig, in sessions.Info) *current {
	c := &current{svc: svc}
	c.set(cfg, ac, in)
	return c
}

// workspace is the directory the current agent works in: where @path
// mentions are read from.
func (c *current) workspace() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ac.Workspace
}

// get returns what the session was opened as.
func (c *current) get() sessions.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

func (c *current) id() string { return c.get().ID }

func (c *current) set(cfg *config.Config, ac config.AgentConfig, in sessions.Info) {
	presets := presetEntries(cfg, ac)
	c.mu.Lock()
	c.info, c.ac, c.presets = in, ac, presets
	c.mu.Unlock()
}

// changed says whether ac, in cfg, differs from what the session's agent
// was opened with: its settings or its presets' entries.
func (c *current) changed(cfg *config.Config, ac config.AgentConfig) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !reflect.DeepEqual(ac, c.ac) || !reflect.DeepEqual(presetEntries(cfg, ac), c.presets)
}

func presetEntries(cfg *config.Config, ac config.AgentConfig) [][]config.Entry {
	var out [][]config.Entry
	for _, name := range ac.PresetNames() {
		entries, _ := cfg.Preset(name)
		out = append(out, entries)
	}
	return out
}
