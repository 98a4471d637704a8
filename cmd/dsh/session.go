package main

import (
	stdctx "context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/google/uuid"
)

// The CLI talks to its agent through the host's session controller: the
// host starts no agent of its own, and dsh run opens the one it talks to,
// under its configured id.

// cliSource is who the CLI's prompts come from.
var cliSource = agentcontroller.Source{Kind: agentcontroller.SourceUser, RPCID: "cli"}

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
// controller: its session: key is resumed when persisted and created under
// that id when not, as the host did for the config's agents; without one,
// a fresh session.
func openSession(ctx stdctx.Context, h *host.Host, ac config.AgentConfig) (*sessions.Session, error) {
	s, _, err := openResumable(ctx, h, ac)
	return s, err
}

// prompt sends text, with the files attached to it, to the session with a
// fresh request id.
func prompt(ctx stdctx.Context, s *sessions.Session, mode agentcontroller.Mode, text string, parts []llm.Part) (string, error) {
	r := sessions.PromptRequest{RequestID: "cli-" + uuid.NewString(), Content: text, Parts: parts, Source: cliSource}
	// Both go through the agent controller's admission.
	if mode == agentcontroller.Steer {
		return s.Steer(ctx, r)
	}
	return s.Prompt(ctx, r)
}

// refused reports a refused prompt to diag (unless the refusing plugin
// presented it itself) and says whether err was a refusal.
func refused(err error, diag io.Writer, suffix string) bool {
	r, ok := sessions.RejectionOf(err)
	if !ok {
		return false
	}
	if !r.Presented {
		fmt.Fprintf(diag, "refused: %s\n%s", refusalText(err, agentcontroller.Refusal{Message: r.Message}), suffix)
	}
	return true
}

// approver attaches the terminal to the session's live hub as an approving
// client and answers each question the hub asks with answer; a question
// settled elsewhere (withdrawn, or answered by another client) cancels the
// answer's ctx.
type approver struct {
	cancel stdctx.CancelFunc
	done   chan struct{}
}

func attachApprover(s *sessions.Session, answer approval.Answerer, diag io.Writer) (*approver, error) {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	tab, err := s.Attach(ctx, sessions.AttachOptions{Approvals: true, Name: "terminal"})
	if err != nil {
		cancel()
		return nil, err
	}
	a := &approver{cancel: cancel, done: make(chan struct{})}
	go a.pump(ctx, s, tab, answer, diag)
	return a, nil
}

// stop detaches the client and waits for the answers in flight to return.
func (a *approver) stop() {
	a.cancel()
	<-a.done
}

func (a *approver) pump(ctx stdctx.Context, s *sessions.Session, tab *sessions.Attachment, answer approval.Answerer, diag io.Writer) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[int64]stdctx.CancelFunc{}
	defer func() {
		mu.Lock()
		for _, cancel := range open {
			cancel()
		}
		mu.Unlock()
		tab.Detach(stdctx.Background())
		wg.Wait()
		close(a.done)
	}()
	client := host.Live(tab)
	if client == nil {
		return
	}
	for {
		u, err := client.Next(ctx)
		if errs.HasCode(err, live.Overflow) {
			// Fell behind (a long answer): re-attach where it stopped;
			// the new attachment is taken before the old one goes, so
			// the session keeps an owner.
			next, aerr := s.Attach(ctx, sessions.AttachOptions{AfterSeq: client.LastSeq(), Approvals: true, Name: "terminal"})
			if aerr != nil {
				fmt.Fprintf(diag, "dsh: the approval prompt lost its session: %v\n", aerr)
				return
			}
			tab.Detach(stdctx.Background())
			tab, client = next, host.Live(next)
			continue
		}
		if err != nil {
			return
		}
		switch u.Kind {
		case live.KindQuestion:
			q, c := u.Question, client
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
					c.Answer(q.ID, ans)
				}
			}()
		case live.KindSettled:
			mu.Lock()
			if cancel, ok := open[u.Settled.QuestionID]; ok {
				cancel()
			}
			mu.Unlock()
		}
	}
}

// current is the session dsh talks to, with the settings its agent was
// opened with; an interactive session replaces it when a reload changes
// them, and the sender and shutdown read it.
type current struct {
	mu      sync.Mutex
	s       *sessions.Session
	ac      config.AgentConfig
	presets [][]config.Entry
}

func newCurrent(cfg *config.Config, ac config.AgentConfig, s *sessions.Session) *current {
	c := &current{}
	c.set(cfg, ac, s)
	return c
}

// workspace is the directory the current agent works in: where @path
// mentions are read from.
func (c *current) workspace() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ac.Workspace
}

func (c *current) get() *sessions.Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

func (c *current) set(cfg *config.Config, ac config.AgentConfig, s *sessions.Session) {
	presets := presetEntries(cfg, ac)
	c.mu.Lock()
	c.s, c.ac, c.presets = s, ac, presets
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
