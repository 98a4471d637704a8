package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
)

// termView renders a session for a person at a colour terminal (the rich
// mode of an interactive dsh run): Markdown answers, one dim line per tool
// call with the first lines of its output, coloured diffs, a status line
// while the model or a tool works and one usage line after each turn.
// The tracker keeps the stream's bookkeeping and hands it the chunks and
// events; plain output (pipes, NO_COLOR, TERM=dumb, --json) never gets here.
type termView struct {
	scr       *termScreen
	out, diag io.Writer
	width     func() int
	md        *markdown
	outputs   *toolOutputs
	// account prices the turn's steps (the config's pricing:).
	account *usage.Account

	mu        sync.Mutex
	answer    mdStream
	reasoning string // the reasoning's line not yet ended
	calls     map[string]string
	status    turnStatus
}

// turnStatus is what the status line shows. It has a lock of its own:
// the screen draws the line while a write of the view's holds the view.
type turnStatus struct {
	mu         sync.Mutex
	phase      string
	turnStart  time.Time
	phaseStart time.Time
	doneTokens int // the output tokens of the turn's finished steps
	stepTokens int // estimated from the step's chunks so far
}

func newTermView(scr *termScreen, out, diag io.Writer, width func() int, md *markdown, outputs *toolOutputs, account *usage.Account) *termView {
	v := &termView{scr: scr, out: out, diag: diag, width: width, md: md, outputs: outputs, account: account, calls: map[string]string{}}
	v.answer.render = func(s string) string { return md.render(s, width()) }
	return v
}

// chunk renders a streamed chunk of the answer or the reasoning.
func (v *termView) chunk(c llm.Chunk) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.status.add(llm.EstimateText(c.Text))
	switch c.Kind {
	case llm.ChunkText:
		v.endReasoning()
		v.status.set("writing")
		done := v.answer.write(printable(c.Text))
		v.scr.setPreview(v.answer.open())
		v.print(v.out, done)
		if done == "" {
			v.scr.refresh()
		}
	case llm.ChunkReasoning:
		// Reasoning is shown dim, a whole line at a time, so the status
		// line stays below it.
		v.status.set("reasoning")
		text, done := v.reasoning+printable(c.Text), ""
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text, done = text[i+1:], text[:i+1]
		}
		v.reasoning = text
		v.scr.setPreview(dimLines(text))
		v.print(v.diag, dimLines(done))
		if done == "" {
			v.scr.refresh()
		}
	}
}

// event renders one durable event of the session.
func (v *termView) event(e session.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.account != nil {
		v.account.Add(e)
	}
	switch e.Type {
	case session.TurnStart:
		v.status.start()
		v.scr.show(v.status.line)
	case session.StepStart:
		v.endAnswer()
		v.status.set("thinking")
	case session.AssistantMessage:
		v.endAnswer()
		v.status.stepDone(e.Usage)
		if e.Finish == session.FinishCut {
			v.print(v.diag, sgrDim+"(answer stopped here)"+sgrReset+"\n")
		}
	case session.ToolCall:
		v.endAnswer()
		c := e.ToolCall
		summary := toolSummary(c.Name, c.Arguments, v.width())
		v.calls[c.ID] = summary
		v.print(v.diag, sgrDim+"● "+summary+sgrReset+"\n")
		v.status.set("running " + summary)
	case session.ToolResult:
		m := e.Message
		summary := v.calls[m.ToolCallID]
		delete(v.calls, m.ToolCallID)
		n := v.outputs.add(summary, m.Content, m.IsError)
		v.print(v.diag, toolPreview(m.Content, m.IsError, n, v.width()))
		v.status.set("thinking")
	case session.PlanUpdated:
		if s := planEventText(e.Plan); s != "" {
			v.endAnswer()
			v.print(v.diag, s)
		}
	case session.Compacted:
		v.endAnswer()
		v.print(v.diag, fmt.Sprintf("%s(%s)%s\n", sgrDim, e.Compaction, sgrReset))
	case session.GoalRecorded:
		v.endAnswer()
		v.print(v.diag, sgrDim+goalEventLine(e)+sgrReset)
	case session.MessageDropped:
		if e.Message != nil {
			v.endAnswer()
			v.print(v.diag, fmt.Sprintf("not delivered (%s): %s\n", droppedWhy(e), oneLine(printable(e.Message.Content), 200)))
		}
	case session.TurnEnd:
		v.endAnswer()
		v.scr.show(nil)
		if e.Error != "" {
			v.print(v.diag, sgrRed+"turn failed: "+printable(e.Error)+sgrReset+"\n")
		}
		v.print(v.diag, sgrDim+v.turnLine(e)+sgrReset+"\n")
	}
}

// turnLine is the line after a turn: how it ended, how long it took, its
// tokens and its cost.
func (v *termView) turnLine(e session.Event) string {
	mark := "✓"
	if e.Reason != "completed" {
		mark = "✗ " + e.Reason
	}
	parts := []string{mark, elapsed(v.status.sinceStart())}
	if v.account != nil {
		if _, t := v.account.Turn(); t.Steps > 0 && t.InputTokens+t.OutputTokens+t.ReasoningTokens > 0 {
			// Short: /usage has the cache and reasoning split.
			c := usage.CountsOf(t)
			parts = append(parts, kilo(c.InputTokens)+" in", kilo(c.OutputTokens)+" out")
			switch {
			case c.Cost != nil:
				parts = append(parts, usage.Money(*c.Cost, v.account.Currency()))
			case len(c.UnpricedModels) > 0:
				parts = append(parts, "cost unknown")
			}
		}
	}
	return "  " + strings.Join(parts, " · ")
}

func (s *turnStatus) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.phase, s.turnStart, s.phaseStart, s.doneTokens, s.stepTokens = "thinking", now, now, 0, 0
}

func (s *turnStatus) set(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.phase != phase {
		s.phase, s.phaseStart = phase, time.Now()
	}
}

func (s *turnStatus) add(tokens int) {
	s.mu.Lock()
	s.stepTokens += tokens
	s.mu.Unlock()
}

// stepDone counts a finished step: its reported output tokens, else the
// estimate of what it streamed.
func (s *turnStatus) stepDone(u *llm.Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u != nil && u.OutputTokens > 0 {
		s.stepTokens = u.OutputTokens
	}
	s.doneTokens += s.stepTokens
	s.stepTokens = 0
}

func (s *turnStatus) sinceStart() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.turnStart)
}

// line renders the status line for a spinner frame: what is happening,
// for how long, and the tokens the turn has written so far.
func (s *turnStatus) line(frame string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf("%s %s · %s", frame, s.phase, elapsed(time.Since(s.turnStart)))
	if n := s.doneTokens + s.stepTokens; n > 0 {
		line += fmt.Sprintf(" · %s tokens", kilo(n))
	}
	if since := time.Since(s.phaseStart); strings.HasPrefix(s.phase, "running") && since >= time.Second {
		line += " (" + elapsed(since) + ")"
	}
	return sgrCyan + line + " · Ctrl-C to cancel" + sgrReset
}

// endAnswer prints what is held of the answer and the reasoning.
func (v *termView) endAnswer() {
	v.endReasoning()
	v.scr.setPreview("")
	v.print(v.out, v.answer.flush())
}

func (v *termView) endReasoning() {
	if text := v.reasoning; text != "" {
		v.reasoning = ""
		v.scr.setPreview("")
		v.print(v.diag, dimLines(text+"\n"))
	}
}

func (v *termView) print(w io.Writer, s string) {
	if s != "" {
		io.WriteString(w, s)
	}
}

// dimLines dims each line of text on its own, so that nothing stays dim
// if the terminal is left between two lines.
func dimLines(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if body := strings.TrimSuffix(l, "\n"); body != "" {
			b.WriteString(sgrDim + body + sgrReset)
		}
		if strings.HasSuffix(l, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// elapsed writes d as 0.4s, 12s or 3m05s.
func elapsed(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
