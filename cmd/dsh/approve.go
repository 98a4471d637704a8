package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugins/hooks"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions"
)

// approvalFlags are dsh run's answers given in advance: --allow TOOL and
// --yolo. They answer only what a policy asks about; a policy's deny never
// reaches an answerer, so explicit deny rules stay denials under both.
type approvalFlags struct {
	allow []string
	yolo  bool
}

var toolName = lazyregexp.New(`^[a-zA-Z0-9_-]{1,64}$`)

// check refuses an --allow that cannot name a tool.
func (f approvalFlags) check() error {
	for _, name := range f.allow {
		if !toolName.MatchString(name) {
			return fmt.Errorf("--allow %q: give a tool name such as bash or edit (letters, digits, '_' and '-'); repeat the flag for more tools", name)
		}
	}
	return nil
}

// preanswer answers req from the flags, if they cover it. A hook's ask
// is never answered by a flag: the hook's author asked for a person, as a
// PreToolUse hook's "ask" does in Claude Code whatever its permission mode,
// and a flag is the operator's answer to dsh's policies, not to hooks.
func (f approvalFlags) preanswer(req approval.Request) (approval.Answer, string, bool) {
	switch {
	case hookAsks(req):
		return approval.Answer{}, "", false
	case f.yolo:
		return approval.Answer{Choice: approval.AllowOnce}, "--yolo", true
	case slices.Contains(f.allow, req.Tool):
		return approval.Answer{Choice: approval.AllowOnce}, "--allow " + req.Tool, true
	}
	return approval.Answer{}, "", false
}

// hookAsks reports whether req is a hooks.command hook's ask.
func hookAsks(req approval.Request) bool {
	return strings.HasPrefix(req.Source, hooks.ID+":") || strings.HasPrefix(req.Source, hooks.ID+"@")
}

// unattendedDenial is the reason a headless run gives the model, and the
// operator, for a call it had nobody to ask about.
func unattendedDenial(req approval.Request) string {
	if hookAsks(req) {
		return fmt.Sprintf("%s: a PreToolUse hook (%s) asks a person about it and dsh run -p has nobody to ask, so it was denied; --yolo and --allow do not answer a hook's ask: run dsh interactively, or change the hook to allow or deny",
			describeCall(req), req.Source)
	}
	return fmt.Sprintf("%s needs approval and dsh run -p has nobody to ask, so it was denied; the operator can rerun with --allow %s to allow %s calls (or --yolo to allow every call a policy asks about)",
		describeCall(req), req.Tool, req.Tool)
}

// headlessAnswerer answers for dsh run -p, which never waits for a person:
// the flags allow, everything else is denied with a reason that names the
// flag to pass. notify sees each question and answer (for --json).
func headlessAnswerer(f approvalFlags, notify func(approvalEvent)) approval.Answerer {
	return func(_ stdctx.Context, req approval.Request) (approval.Answer, error) {
		notify(requested(req))
		ans, by, ok := f.preanswer(req)
		if !ok {
			ans, by = approval.Answer{Choice: approval.Deny, Reason: unattendedDenial(req), Unattended: true}, "unattended"
		}
		notify(answered(req, ans, by))
		return ans, nil
	}
}

// approvalEvent is one --json line about an approval: approval/requested
// when a policy asks, approval/answered with the choice and who made it
// (the person, a flag, or "unattended" for a headless denial).
type approvalEvent struct {
	Type    string          `json:"type"`
	Agent   string          `json:"agent"`
	CallID  string          `json:"call_id"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"arguments,omitempty"`
	Summary string          `json:"summary,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Pattern string          `json:"pattern,omitempty"`
	Choice  approval.Choice `json:"choice,omitempty"`
	By      string          `json:"by,omitempty"`
}

// Event names of the --json approval lines.
const (
	approvalRequested = "approval/requested"
	approvalAnswered  = "approval/answered"
)

func requested(req approval.Request) approvalEvent {
	return approvalEvent{Type: approvalRequested, Agent: req.AgentID, CallID: req.CallID, Tool: req.Tool, Args: req.Arguments, Summary: req.Summary, Reason: req.Reason, Pattern: req.Pattern}
}

func answered(req approval.Request, ans approval.Answer, by string) approvalEvent {
	return approvalEvent{Type: approvalAnswered, Agent: req.AgentID, CallID: req.CallID, Tool: req.Tool, Choice: ans.Choice, Reason: ans.Reason, By: by}
}

// approvalNotifier renders approval events: JSON lines on out with --json;
// otherwise only what the operator must know on diag — a call the flags
// allowed, or one denied for want of a person.
func approvalNotifier(jsonOut bool, out, diag io.Writer) func(approvalEvent) {
	return func(e approvalEvent) {
		if jsonOut {
			if b, err := json.Marshal(e); err == nil {
				out.Write(append(b, '\n'))
			}
			return
		}
		if e.Type != approvalAnswered {
			return
		}
		switch e.Choice {
		case approval.Deny:
			fmt.Fprintf(diag, "dsh: denied: %s\n", e.Reason)
		default:
			fmt.Fprintf(diag, "(%s allowed by %s)\n", e.Tool, e.By)
		}
	}
}

// describeCall names a call for a person: the tool and its summary (bash's
// command line), or its arguments, short.
func describeCall(req approval.Request) string {
	what := req.Summary
	if what == "" {
		what = briefArgs(req.Arguments, 160)
	}
	if what == "" {
		return req.Tool
	}
	return fmt.Sprintf("%s (%s)", req.Tool, oneLine(what, 160))
}

// briefArgs renders a call's arguments as key=value pairs, each value cut
// short, within about n characters.
func briefArgs(raw json.RawMessage, n int) string {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return oneLine(strings.TrimSpace(string(raw)), n)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		var v string
		switch x := args[k].(type) {
		case string:
			v = strconv.Quote(cut(x, 60))
		default:
			b, _ := json.Marshal(x)
			v = cut(string(b), 60)
		}
		parts = append(parts, k+"="+v)
	}
	return cut(strings.Join(parts, " "), n)
}

// cut shortens s to about n runes, marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// answers says whether the host asks about tool calls at all: without the
// approval service no stage asks, and no stream can answer.
func answers(h *host.Host) bool {
	_, err := approval.Key.Get(h.Root())
	if err != nil {
		h.Logger().Debug("no approval service; nothing will ask", "error", err)
	}
	return err == nil
}

// warnUnknownAllow tells the operator about an --allow naming a tool the
// session's agent does not have (in.Tools, from the session service): a
// typo would otherwise allow nothing, silently.
func warnUnknownAllow(in sessions.Info, f approvalFlags, diag io.Writer) {
	for _, name := range f.allow {
		if !slices.Contains(in.Tools, name) {
			fmt.Fprintf(diag, "dsh: --allow %s: agent %s has no tool %q (its tools: %s)\n", name, in.AgentID, name, orNone(in.Tools))
		}
	}
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
