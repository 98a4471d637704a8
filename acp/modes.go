package acp

import (
	stdctx "context"
	"fmt"
	"sync/atomic"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
)

// The ACP modes, named like dsh's built-in presets.
const (
	ModeReadOnly       = "read-only"
	ModeWorkspaceWrite = "workspace-write"
	ModeFullAccess     = "full-access"
	// ModePlan is plan mode (tools.plan): only read-only tools run, and
	// what does asks as in workspace-write; see plan.go.
	ModePlan = "plan"
)

var modeList = []acp.SessionMode{
	{Id: ModeReadOnly, Name: "Read only", Description: acp.Ptr("read, list, glob and grep; every other tool is refused")},
	{Id: ModeWorkspaceWrite, Name: "Workspace write", Description: acp.Ptr("the file tools write in the workspace; bash and other tools ask first")},
	{Id: ModeFullAccess, Name: "Full access", Description: acp.Ptr("nothing asks; what the configured policy denies stays denied")},
	{Id: ModePlan, Name: "Plan", Description: acp.Ptr("plan mode: only tools that read run until you approve the agent's plan (needs tools.plan)")},
}

// The tools each mode lets through without asking (tools.permission's
// lists, so the two agree).
var (
	readTools  = map[string]bool{"read": true, "list": true, "glob": true, "grep": true, "clock": true}
	writeTools = map[string]bool{"write": true, "edit": true}
	// planTools are tools.plan's: the todo list changes only the session,
	// and exit_plan_mode asks the person itself, so the mode asking too
	// would put the question twice.
	planTools = map[string]bool{"todo": true, "exit_plan_mode": true}
)

func validMode(m string) bool {
	return m == ModeReadOnly || m == ModeWorkspaceWrite || m == ModeFullAccess || m == ModePlan
}

func badMode(m string) error {
	return errs.New(BadParams, fmt.Sprintf("mode %q is not one of read-only, workspace-write, full-access, plan", m))
}

func modeState(current string) *acp.SessionModeState {
	return &acp.SessionModeState{AvailableModes: modeList, CurrentModeId: acp.SessionModeId(current)}
}

// modePolicy is the approval policy of one session's mode. It runs before
// every other policy of the agent (it is prepended) and asks them first:
// a mode tightens or loosens their asks, and never lifts their denials.
type modePolicy struct {
	mode atomic.Value // string
}

// newModePolicy is the policy of a session starting in mode; acp.session
// mounts it in the session's agent (link.go).
func newModePolicy(mode string) *modePolicy {
	p := &modePolicy{}
	p.mode.Store(mode)
	return p
}

func (p *modePolicy) get() string  { return p.mode.Load().(string) }
func (p *modePolicy) set(m string) { p.mode.Store(m) }

const modeSource = "acp mode"

func (p *modePolicy) approve(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
	mode, name := p.get(), a.Call.Name
	if mode == ModeReadOnly && !readTools[name] {
		return tools.Verdict{Decision: tools.Deny, Source: modeSource, Reason: "the editor's session is in read-only mode, where only read, list, glob and grep run; the person can switch it to workspace-write"}, nil
	}
	v, err := next.Call(ctx, a)
	if err != nil {
		return v, err
	}
	switch {
	case (mode == ModeWorkspaceWrite || mode == ModePlan) && v.Decision == tools.Allow && !readTools[name] && !writeTools[name] && !planTools[name]:
		v.Decision, v.Source = tools.Ask, modeSource
		v.Reason = fmt.Sprintf("workspace-write mode asks before %s runs", name)
	case mode == ModeFullAccess && v.Decision == tools.Ask:
		v.Decision, v.Source, v.Reason = tools.Allow, modeSource, "full-access mode"
	}
	return v, nil
}
