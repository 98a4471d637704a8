// Package reviewer is the policy.reviewer plugin: an approval policy that
// asks a reviewer about each tool call it covers — a model, through the
// llm service, or an external command (a local policy engine, a script) —
// and decides as the reviewer answers: allow, deny or ask a person.
//
// The reviewer gets the call (tool, arguments, agent, workspace) and who
// is behind its turn (the call's sources), as JSON: in the model's user
// message, or on the command's stdin. It answers one JSON object,
// {"verdict": "allow"|"deny"|"ask", "reason": "..."}; a model may wrap it in
// prose or a code fence. The review fails closed: a reviewer that takes
// longer than its timeout, fails, or answers anything else denies the
// call, and the model is told why. Every verdict is logged with its reason
// and carried by the approval stage's verdict (Source policy.reviewer),
// which the decision records keep.
//
// An allow or ask hears the policies after this one first: a deny there
// still stands. The command runs through internal/childproc like every
// child process: its own process group, killed whole at the timeout, a
// minimal environment.
package reviewer

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// ID is the plugin's id, and the Source of its verdicts.
const ID = "policy.reviewer"

// Config is the plugin's configuration.
type Config struct {
	// Tools are the tools whose calls are reviewed, names or globs
	// ("bash", "mcp_*"); default every tool.
	Tools []string `koanf:"tools"`
	// Provider and Model name the reviewer model (a provider registered
	// with the llm service); Instructions replace the default system
	// prompt.
	Provider     string `koanf:"provider"`
	Model        string `koanf:"model"`
	Instructions string `koanf:"instructions"`
	// Command is the reviewer program and its arguments, run without a
	// shell; Env is set in its environment, Passthrough names variables
	// of dsh's it may see.
	Command     []string          `koanf:"command"`
	Env         map[string]string `koanf:"env"`
	Passthrough []string          `koanf:"passthrough"`
	// Timeout bounds one review; default 30s. A review that overruns it
	// denies the call.
	Timeout time.Duration `koanf:"timeout"`
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Provider == "" && len(c.Command) == 0:
		return errs.New(errs.InvalidArgument, "policy.reviewer: name a reviewer: provider (and model) for a model through the llm service, or command for a program")
	case c.Provider != "" && len(c.Command) > 0:
		return errs.New(errs.InvalidArgument, "policy.reviewer: set provider or command, not both")
	case len(c.Command) > 0 && c.Command[0] == "":
		return errs.New(errs.InvalidArgument, "policy.reviewer: command[0] is empty; give the program to run")
	case c.Timeout < 0:
		return errs.New(errs.InvalidArgument, "policy.reviewer: timeout cannot be negative; leave it out for 30s")
	}
	for i, t := range c.Tools {
		if _, err := path.Match(t, ""); err != nil {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("policy.reviewer: tools[%d] %q is not a glob: %v", i, t, err))
		}
	}
	return nil
}

// DefaultTimeout bounds a review when the config does not.
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds what a reviewer may answer.
const maxAnswer = 64 << 10

// defaultInstructions is the reviewer model's system prompt.
const defaultInstructions = `You review tool calls an AI agent wants to make, before they run.
You get the call (tool, arguments, agent, workspace) and who is behind the agent's turn (sources: principal, entry point, on whose behalf).
Answer with one JSON object and nothing else: {"verdict": "allow" | "deny" | "ask", "reason": "<one sentence>"}.
Deny what is destructive, exfiltrates data or reaches outside the task; ask when a person should decide; allow the rest.`

// Reviewer is one mounted policy.reviewer.
type Reviewer struct {
	cfg    Config
	models *llm.Service
	log    hclog.Logger
	source string
}

// Plugin is policy.reviewer.
var Plugin = plugin.Register(ID, "asks a reviewer model or command about each tool call; fails closed on timeout, error or an unreadable answer", func(ctx *dshctx.Context, cfg Config) error {
	r := &Reviewer{cfg: cfg, log: ctx.Logger(), source: ID}
	if cfg.Provider != "" {
		svc, err := llm.Key.Get(ctx)
		if err != nil {
			return err
		}
		r.models = svc.In(ctx)
	}
	if r.cfg.Timeout == 0 {
		r.cfg.Timeout = DefaultTimeout
	}
	_, err := tools.EventApprove.On(ctx, r.approve)
	return err
}, llm.Key)

// review is what the reviewer is shown.
type review struct {
	Tool       string           `json:"tool"`
	CallID     string           `json:"call_id"`
	Arguments  json.RawMessage  `json:"arguments"`
	Agent      string           `json:"agent"`
	Workspace  string           `json:"workspace,omitempty"`
	Unattended bool             `json:"unattended,omitempty"`
	Sources    []llm.Provenance `json:"sources,omitempty"`
}

// answer is what a reviewer says.
type answer struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

func (r *Reviewer) covers(tool string) bool {
	if len(r.cfg.Tools) == 0 {
		return true
	}
	for _, g := range r.cfg.Tools {
		if ok, _ := path.Match(g, tool); ok {
			return true
		}
	}
	return false
}

func (r *Reviewer) approve(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
	if !r.covers(a.Call.Name) {
		return next.Call(ctx, a)
	}
	args := a.Call.Arguments
	if !json.Valid(args) {
		args = json.RawMessage(`{}`)
	}
	in, _ := json.Marshal(review{Tool: a.Call.Name, CallID: a.Call.ID, Arguments: args, Agent: a.Call.AgentID,
		Workspace: a.Call.Workspace, Unattended: a.Call.Unattended, Sources: a.Call.Sources})
	rctx, cancel := stdctx.WithTimeout(ctx, r.cfg.Timeout)
	ans, err := r.ask(rctx, a.Call, in)
	timedOut := rctx.Err() == stdctx.DeadlineExceeded && ctx.Err() == nil
	cancel()
	if ctx.Err() != nil {
		return tools.Verdict{}, stdctx.Cause(ctx)
	}
	v := tools.Verdict{Source: r.source}
	switch {
	case timedOut:
		v.Decision, v.Reason = tools.Deny, fmt.Sprintf("reviewer/timeout: the reviewer did not answer within %s, so the call is denied", r.cfg.Timeout)
	case err != nil:
		v.Decision, v.Reason = tools.Deny, fmt.Sprintf("reviewer/failed: the reviewer failed (%v), so the call is denied", err)
	default:
		v.Decision, v.Reason = tools.Decision(ans.Verdict), "reviewer/"+ans.Verdict
		if ans.Reason != "" {
			v.Reason += ": " + ans.Reason
		}
	}
	r.log.Info("policy.reviewer: reviewed a tool call", "agent", a.Call.AgentID, "call", a.Call.ID, "tool", a.Call.Name,
		"verdict", string(v.Decision), "reason", v.Reason)
	if v.Decision == tools.Deny {
		return v, nil
	}
	after, err := next.Call(ctx, a)
	if err != nil {
		return after, err
	}
	if after.Decision == tools.Deny && after.Source != "" {
		return after, nil
	}
	v.Arguments = after.Arguments
	return v, nil
}

// ask asks the configured reviewer and reads its verdict.
func (r *Reviewer) ask(ctx stdctx.Context, call tools.Call, in []byte) (answer, error) {
	var text string
	var err error
	if r.models != nil {
		text, err = r.askModel(ctx, call, in)
	} else {
		text, err = r.askCommand(ctx, in)
	}
	if err != nil {
		return answer{}, err
	}
	return parse(text)
}

// parse reads the verdict: the first JSON object in text.
func parse(text string) (answer, error) {
	var a answer
	start := strings.Index(text, "{")
	if start < 0 {
		return a, fmt.Errorf("its answer holds no JSON object: %q", clip(text))
	}
	dec := json.NewDecoder(strings.NewReader(text[start:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("its answer is not {\"verdict\": …, \"reason\": …}: %v in %q", err, clip(text))
	}
	switch tools.Decision(a.Verdict) {
	case tools.Allow, tools.Deny, tools.Ask:
		return a, nil
	}
	return a, fmt.Errorf("its verdict is %q; it must be allow, deny or ask", a.Verdict)
}

func (r *Reviewer) askModel(ctx stdctx.Context, call tools.Call, in []byte) (string, error) {
	sys := r.cfg.Instructions
	if sys == "" {
		sys = defaultInstructions
	}
	st, err := r.models.Stream(ctx, llm.Request{
		// Its own key, so a provider keeping state per agent does not mix
		// the reviews into the agent's conversation.
		AgentID: call.AgentID + "/" + ID, Provider: r.cfg.Provider, Model: r.cfg.Model, System: sys, MaxTokens: 1024,
		History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "Review this tool call:\n" + string(in)}),
	})
	if err != nil {
		return "", err
	}
	defer st.Close()
	asm := &llm.Assembler{}
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		asm.Add(c)
		if c.Kind == llm.ChunkFinish {
			break
		}
	}
	if finish, why := asm.Finish(); finish == llm.FinishError {
		return "", fmt.Errorf("the model reported an error: %s", why)
	}
	return asm.Message().Content, nil
}

// askCommand runs the command with the review on stdin and returns its
// stdout; a non-zero exit is a failure, with the end of its stderr.
func (r *Reviewer) askCommand(ctx stdctx.Context, in []byte) (string, error) {
	p, err := childproc.New(childproc.Spec{Path: r.cfg.Command[0], Args: r.cfg.Command[1:], Env: r.cfg.Env, Passthrough: r.cfg.Passthrough})
	if err != nil {
		return "", err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		p.Stop(0)
		return "", err
	}
	defer outR.Close()
	var stderr bytes.Buffer
	p.Cmd.Stdin = bytes.NewReader(in)
	p.Cmd.Stdout = outW
	p.Cmd.Stderr = &limited{w: &stderr, n: 4 << 10}
	p.Cmd.WaitDelay = time.Second
	if err := p.Start(); err != nil {
		outW.Close()
		return "", fmt.Errorf("command %s cannot start: %w", r.cfg.Command[0], err)
	}
	outW.Close()
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(outR, maxAnswer))
		read <- b
	}()
	exited := make(chan struct{})
	go func() { _ = p.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-ctx.Done():
	}
	p.Stop(time.Second)
	<-exited
	var out []byte
	select {
	case out = <-read:
	case <-time.After(time.Second):
		// Something outside the group holds the pipe: cut the read.
		outR.Close()
		out = <-read
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if st := p.Cmd.ProcessState; st != nil && !st.Success() {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "", fmt.Errorf("command %s was killed by %s", r.cfg.Command[0], ws.Signal())
		}
		return "", fmt.Errorf("command %s exited with status %d: %s", r.cfg.Command[0], st.ExitCode(), clip(strings.TrimSpace(stderr.String())))
	}
	return string(out), nil
}

// limited keeps the first n bytes written to it and drops the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
