package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/services/tools"
)

// output is the JSON a hook may print on stdout (Claude Code's fields).
type output struct {
	Continue           *bool           `json:"continue"`
	StopReason         string          `json:"stopReason"`
	SuppressOutput     bool            `json:"suppressOutput"`
	SystemMessage      string          `json:"systemMessage"`
	Decision           string          `json:"decision"`
	Reason             string          `json:"reason"`
	HookSpecificOutput *specificOutput `json:"hookSpecificOutput"`
}

type specificOutput struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       string          `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason"`
	UpdatedInput             json.RawMessage `json:"updatedInput"`
	AdditionalContext        string          `json:"additionalContext"`
	// Decision is PermissionRequest's answer to the prompt.
	Decision *struct {
		Behavior     string          `json:"behavior"`
		Message      string          `json:"message"`
		UpdatedInput json.RawMessage `json:"updatedInput"`
		Interrupt    bool            `json:"interrupt"`
	} `json:"decision"`
}

// reply is what one hook answered, in dsh's terms.
type reply struct {
	hook *compiled
	// block: exit code 2, "decision": "block", or a deny.
	block  bool
	reason string
	// decision is PreToolUse's permission decision ("" when none).
	decision tools.Decision
	// updatedInput replaces a PreToolUse call's arguments.
	updatedInput json.RawMessage
	// context is additionalContext, or the plain stdout of the events that
	// take it as context (UserPromptSubmit, SessionStart).
	context string
	// stop is "continue": false: the turn ends, with stopReason.
	stop       bool
	stopReason string
	// failed describes a non-blocking error (logged, nothing else).
	failed string
	// systemMessage is logged for the operator.
	systemMessage string
	// ignored names the fields of the hook's JSON dsh does not act on.
	ignored []string
}

// The fields of a hook's JSON answer dsh reads (see output).
var (
	outputKeys   = []string{"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason", "hookSpecificOutput"}
	specificKeys = []string{"hookEventName", "permissionDecision", "permissionDecisionReason", "updatedInput", "additionalContext", "decision"}
)

// unread names the fields of a hook's JSON answer that dsh does not act
// on (Claude Code's updatedMCPToolOutput, a PermissionRequest's decision,
// a misspelt key), so they are logged rather than dropped without a word.
func unread(text string) []string {
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &top) != nil {
		return nil
	}
	var out []string
	for k, v := range top {
		if !slices.Contains(outputKeys, k) {
			out = append(out, k)
			continue
		}
		var inner map[string]json.RawMessage
		if k == "hookSpecificOutput" && json.Unmarshal(v, &inner) == nil {
			for ik := range inner {
				if !slices.Contains(specificKeys, ik) {
					out = append(out, k+"."+ik)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// interpret reads how a hook ended, following Claude Code: exit 2 blocks
// with stderr as the reason; exit 0 may carry JSON decisions on stdout;
// any other ending is a non-blocking error.
func interpret(h *compiled, r ran) reply {
	out := reply{hook: h}
	switch {
	case r.err != nil:
		out.failed = fmt.Sprintf("could not run: %v", r.err)
		return out
	case r.timedOut:
		out.failed = fmt.Sprintf("timed out after %s; its process group was killed%s", h.timeout, tail(r.stderr))
		return out
	case r.signal != "":
		out.failed = fmt.Sprintf("was killed by signal %s%s", r.signal, tail(r.stderr))
		return out
	case r.exit == 2:
		out.block = true
		out.reason = strings.TrimSpace(r.stderr)
		if out.reason == "" {
			out.reason = fmt.Sprintf("the %s hook %q exited with code 2 and wrote no reason on stderr", h.event, h.command)
		}
		if h.event == PreToolUse || h.event == PermissionRequest {
			out.decision = tools.Deny
		}
		return out
	case r.exit != 0:
		out.failed = fmt.Sprintf("exited with code %d (not 0, not 2: a non-blocking error)%s", r.exit, tail(r.stderr))
		return out
	}
	text := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(text, "{") {
		if h.event == UserPromptSubmit || h.event == SessionStart {
			out.context = text
		}
		return out
	}
	var o output
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&o); err != nil {
		out.failed = fmt.Sprintf("printed output that starts like JSON but is not valid JSON (%v); its decisions were ignored: %s", err, clip(text, 200))
		return out
	}
	out.ignored = unread(text)
	out.systemMessage = o.SystemMessage
	if o.Continue != nil && !*o.Continue {
		out.stop = true
		out.stopReason = o.StopReason
		if out.stopReason == "" {
			out.stopReason = fmt.Sprintf("the %s hook %q asked to stop (continue: false)", h.event, h.command)
		}
	}
	switch o.Decision {
	case "":
	case "block":
		out.block = true
		out.reason = o.Reason
	case "approve": // the older PreToolUse form
		if h.event == PreToolUse {
			out.decision = tools.Allow
			out.reason = o.Reason
		}
	default:
		out.failed = fmt.Sprintf(`printed "decision": %q, which is not "block" (or "approve" for PreToolUse); ignored`, o.Decision)
	}
	if s := o.HookSpecificOutput; s != nil {
		out.context = s.AdditionalContext
		if h.event == PreToolUse {
			switch d := tools.Decision(s.PermissionDecision); d {
			case "":
			case tools.Allow, tools.Deny, tools.Ask:
				out.decision = d
				if s.PermissionDecisionReason != "" {
					out.reason = s.PermissionDecisionReason
				}
			default:
				out.failed = fmt.Sprintf(`printed "permissionDecision": %q, which is not allow, deny or ask; ignored`, d)
			}
			if u := bytes.TrimSpace(s.UpdatedInput); len(u) > 0 && !bytes.Equal(u, []byte("null")) {
				if u[0] != '{' {
					out.failed = "printed an updatedInput that is not a JSON object; ignored"
				} else {
					out.updatedInput = u
				}
			}
		}
	}
	if s := o.HookSpecificOutput; s != nil && s.Decision != nil && h.event == PermissionRequest {
		switch d := s.Decision; d.Behavior {
		case "allow":
			// An updatedInput that is no object names a call the hook did
			// not write: allowing the original instead would fail open.
			switch u := bytes.TrimSpace(d.UpdatedInput); {
			case len(u) == 0 || bytes.Equal(u, []byte("null")):
				out.decision = tools.Allow
			case u[0] == '{':
				out.decision, out.updatedInput = tools.Allow, u
			default:
				out.failed = `printed "decision": {"behavior": "allow"} with an updatedInput that is not a JSON object; not allowed`
			}
		case "deny":
			out.decision, out.reason = tools.Deny, d.Message
			if d.Interrupt {
				out.stop, out.stopReason = true, d.Message
			}
		default:
			out.failed = fmt.Sprintf(`printed "decision": {"behavior": %q}, which is not allow or deny; ignored`, d.Behavior)
		}
	}
	if (h.event == PreToolUse || h.event == PermissionRequest) && out.block {
		out.decision = tools.Deny
	}
	if out.block && out.reason == "" {
		out.reason = fmt.Sprintf("blocked by the %s hook %q (no reason given)", h.event, h.command)
	}
	return out
}

// tail is the end of a hook's stderr for a log line.
func tail(stderr string) string {
	s := strings.TrimSpace(stderr)
	if s == "" {
		return ""
	}
	const max = 500
	if len(s) > max {
		s = "…" + strings.ToValidUTF8(s[len(s)-max:], "")
	}
	return "; stderr: " + s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
