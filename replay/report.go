package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/services/session"
)

// Kinds of a change, in the order a report lists them: what the new
// config lets through that the old one stopped comes first.
const (
	// Relaxed: stopped then, let through now (DENY→ALLOW, refuse→admit,
	// ask→allow, deny→ask).
	Relaxed = "relaxed"
	// Tightened: let through then, stopped now (ALLOW→DENY).
	Tightened = "tightened"
	// Changed: another verdict of the same strictness (a stage error).
	Changed = "changed"
)

// Verdict is one side of a change.
type Verdict struct {
	Verdict       string `json:"verdict"`
	Reason        string `json:"reason,omitempty"`
	Policy        string `json:"policy,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
}

func verdictOf(d *session.Decision) *Verdict {
	if d == nil {
		return nil
	}
	return &Verdict{Verdict: d.Verdict, Reason: d.Reason, Policy: d.Policy, PolicyVersion: d.PolicyVersion}
}

// Change is a decision whose verdict differs on replay. Before is nil for
// a decision the recording does not hold (a call the old config never
// judged), After for one the replay did not make.
type Change struct {
	Kind  string `json:"kind"`
	Stage string `json:"stage"`
	// Turn and Step are the recorded turn and step (0 when the recording
	// has no turn for the message: it was refused).
	Turn      int      `json:"turn,omitempty"`
	Step      int      `json:"step,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
	CallID    string   `json:"call_id,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	Before    *Verdict `json:"before"`
	After     *Verdict `json:"after"`
}

// TurnChange is a recorded turn that would now be refused or end
// otherwise.
type TurnChange struct {
	Turn      int    `json:"turn"`
	RequestID string `json:"request_id"`
	// Before is how the turn ended; After "refused" (admission turned its
	// prompt away) or how it ends now.
	Before string `json:"before"`
	After  string `json:"after"`
	// Why is the refusal or the end's error.
	Why string `json:"why,omitempty"`
}

// Report is what the replay of one session found.
type Report struct {
	Session string `json:"session"`
	Agent   string `json:"agent"`
	// Steps are the model steps the recording holds; Decisions the
	// decisions compared.
	Steps     int          `json:"steps"`
	Decisions int          `json:"decisions"`
	Changes   []Change     `json:"changes"`
	Turns     []TurnChange `json:"turns"`
	// Error says why the session could not be replayed.
	Error string `json:"error,omitempty"`
}

// Changed reports whether anything differs.
func (r Report) Changed() bool { return len(r.Changes)+len(r.Turns) > 0 }

// key identifies a decision across the recording and the replay.
type key struct {
	stage, turn string
	step        int
	request     string
	call        string
	n           int // the how-manieth decision of the same key
}

// index keys the admission and approval decisions of a log. Answers are
// not compared: the replay answers an Ask as the recording did, and the
// approval verdict already says whether a call is asked about at all.
func index(events []session.Event, turns map[int]string) (map[key]*session.Event, []key) {
	out := map[key]*session.Event{}
	var order []key
	for i := range events {
		e := &events[i]
		if e.Type != session.DecisionRecorded || e.Decision == nil {
			continue
		}
		d := e.Decision
		var k key
		switch d.Stage {
		case session.StageAdmission:
			k = key{stage: d.Stage, request: d.RequestID}
		case session.StageApproval:
			k = key{stage: d.Stage, turn: turns[e.Turn], step: e.Step, call: d.CallID}
		default:
			continue
		}
		for out[k] != nil {
			k.n++
		}
		out[k] = e
		order = append(order, k)
	}
	return out, order
}

// strictness orders verdicts: a higher one lets less through.
func strictness(v string) int {
	switch v {
	case "admit", "allow", "allow-once", "allow-session":
		return 0
	case "ask":
		return 1
	}
	return 2 // refuse, expire, deny, error
}

func kindOf(before, after *Verdict) string {
	switch {
	case before == nil || after == nil:
		return Changed
	case strictness(after.Verdict) < strictness(before.Verdict):
		return Relaxed
	case strictness(after.Verdict) > strictness(before.Verdict):
		return Tightened
	}
	return Changed
}

// compare fills rep with what differs between the recorded script s and
// the replayed events; refusals are the prompts admission refused on
// replay, by request id.
func compare(rep *Report, s script, replayed []session.Event, refusals map[string]string) {
	was, order := index(s.decisions, s.turnReq)
	now, nowOrder := index(replayed, turnRequests(replayed))
	recTurn := map[string]int{}
	for n, req := range s.turnReq {
		recTurn[req] = n
	}
	ran := map[string]bool{}
	for _, req := range turnRequests(replayed) {
		ran[req] = true
	}
	for _, k := range order {
		rep.Decisions++
		b, a := was[k], now[k]
		if a == nil && k.stage == session.StageApproval && !ran[k.turn] {
			// The turn does not run now: reported once, as a turn.
			continue
		}
		var bd, ad *session.Decision
		bd = b.Decision
		if a != nil {
			ad = a.Decision
		}
		if a != nil && ad.Verdict == bd.Verdict {
			continue
		}
		rep.Changes = append(rep.Changes, change(k, b, a, recTurn))
	}
	for _, k := range nowOrder {
		// A log written before decision records holds none to compare
		// with: only its turns are (below).
		if was[k] == nil && len(s.decisions) > 0 {
			rep.Changes = append(rep.Changes, change(k, nil, now[k], recTurn))
		}
	}
	slices.SortStableFunc(rep.Changes, func(x, y Change) int { return cmp.Compare(kindRank(x.Kind), kindRank(y.Kind)) })

	// Turns: each recorded turn's prompt refused now, or ending otherwise.
	ends := map[string]session.Event{}
	nowTurns := turnRequests(replayed)
	for _, e := range replayed {
		if e.Type == session.TurnEnd {
			ends[nowTurns[e.Turn]] = e
		}
	}
	var reqs []string
	for req := range s.ends {
		reqs = append(reqs, req)
	}
	slices.SortFunc(reqs, func(x, y string) int { return cmp.Compare(recTurn[x], recTurn[y]) })
	for _, req := range reqs {
		before := s.ends[req]
		tc := TurnChange{Turn: recTurn[req], RequestID: req, Before: before}
		if why, refused := refusals[req]; refused {
			tc.After, tc.Why = "refused", oneLine(why)
		} else if end, ok := ends[req]; !ok {
			tc.After = "not run"
		} else if end.Reason != before {
			tc.After, tc.Why = end.Reason, oneLine(end.Error)
		} else {
			continue
		}
		rep.Turns = append(rep.Turns, tc)
	}
}

func kindRank(k string) int {
	switch k {
	case Relaxed:
		return 0
	case Tightened:
		return 1
	}
	return 2
}

func change(k key, before, after *session.Event, recTurn map[string]int) Change {
	c := Change{Stage: k.stage, RequestID: k.request, CallID: k.call, Step: k.step, Turn: recTurn[k.turn]}
	if k.stage == session.StageAdmission {
		c.Turn = recTurn[k.request]
	}
	for _, e := range []*session.Event{before, after} {
		if e != nil && c.Tool == "" {
			c.Tool = e.Decision.Tool
		}
	}
	if before != nil {
		c.Before = verdictOf(before.Decision)
	}
	if after != nil {
		c.After = verdictOf(after.Decision)
	}
	c.Kind = kindOf(c.Before, c.After)
	return c
}

// Write prints reports for people: per session, each changed decision
// (what is let through now first), then each changed turn; "no changes"
// when nothing differs anywhere.
func Write(w io.Writer, reports []Report) {
	any := false
	for _, r := range reports {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "session %s: not replayed: %s\n", r.Session, r.Error)
			any = true
			continue
		case !r.Changed():
			fmt.Fprintf(w, "session %s: no changes (%d decisions, %d steps)\n", r.Session, r.Decisions, r.Steps)
			continue
		}
		any = true
		fmt.Fprintf(w, "session %s: %d decisions changed, %d turns changed (of %d decisions, %d steps)\n",
			r.Session, len(r.Changes), len(r.Turns), r.Decisions, r.Steps)
		for _, c := range r.Changes {
			what := "request " + c.RequestID
			if c.Stage == session.StageApproval {
				what = fmt.Sprintf("step %d call %s %s", c.Step, c.CallID, c.Tool)
			}
			fmt.Fprintf(w, "  %-10s %-9s turn %d %s: %s -> %s\n", strings.ToUpper(arrow(c)), c.Stage, c.Turn, what, side(c.Before), side(c.After))
		}
		for _, t := range r.Turns {
			why := ""
			if t.Why != "" {
				why = ": " + t.Why
			}
			fmt.Fprintf(w, "  turn %d (request %s) %s -> %s%s\n", t.Turn, t.RequestID, t.Before, t.After, why)
		}
	}
	if !any {
		fmt.Fprintln(w, "no changes")
	}
}

// arrow is "DENY→ALLOW"-style shorthand of a change.
func arrow(c Change) string {
	name := func(v *Verdict) string {
		if v == nil {
			return "none"
		}
		return v.Verdict
	}
	return name(c.Before) + "→" + name(c.After)
}

func side(v *Verdict) string {
	if v == nil {
		return "(no decision)"
	}
	s := v.Verdict
	var by []string
	if v.Policy != "" {
		by = append(by, v.Policy)
	}
	if v.Reason != "" {
		by = append(by, oneLine(v.Reason))
	}
	if len(by) > 0 {
		s += " (" + strings.Join(by, ": ") + ")"
	}
	return s
}
