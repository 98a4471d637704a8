package replay

import (
	"encoding/json"

	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// Recording is one recorded session to replay: its log as the store
// keeps it and the configured agent that ran it.
type Recording struct {
	Session string
	Agent   string
	Events  []session.Event
}

// prompt is a message the recorded session was sent, in the order the
// log holds it: a turn's prompt, a steering message, or one admission
// turned away.
type prompt struct {
	requestID string
	content   string
	steer     bool
	source    sessions.Source
	// turn is the request id of the recorded turn the message started
	// or joined, "" for one admission turned away.
	turn string
}

// script is what a recording says the model and the tools did, keyed by
// the request id of the turn's first message (turn numbers shift when a
// turn is refused on replay; request ids do not).
type script struct {
	prompts []prompt
	// replies are the recorded assistant messages of each turn, in order.
	replies map[string][]reply
	// results are the recorded tool results of each turn by call id, in
	// order (ids repeat across steps with some providers).
	results map[string]map[string][]llm.Message
	// answers are the recorded answers to the turn's Asks, by call id.
	answers map[string]map[string][]session.Decision
	// ends are the recorded turn/end reasons by turn request id.
	ends map[string]string
	// turnReq maps a recorded turn number to its request id.
	turnReq   map[int]string
	decisions []session.Event
	model     string
	steps     int
}

type reply struct {
	msg    llm.Message
	usage  *llm.Usage
	finish llm.FinishReason
}

// turnRequests maps each turn of a log to the request id of its first
// user message; a turn started without one is named by its number.
func turnRequests(events []session.Event) map[int]string {
	out := map[int]string{}
	for _, e := range events {
		if e.Type == session.UserMessage && e.Message != nil {
			if _, ok := out[e.Turn]; !ok {
				out[e.Turn] = requestOf(e)
			}
		}
	}
	return out
}

func requestOf(e session.Event) string {
	if e.RequestID != "" {
		return e.RequestID
	}
	if e.Message != nil && e.Message.RequestID != "" {
		return e.Message.RequestID
	}
	if e.Message != nil && e.Message.ID != "" {
		return "message:" + e.Message.ID
	}
	return "turn:" + itoa(e.Turn)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// read builds the script of a recording.
func read(rec Recording) script {
	s := script{replies: map[string][]reply{}, results: map[string]map[string][]llm.Message{},
		answers: map[string]map[string][]session.Decision{}, ends: map[string]string{}, turnReq: turnRequests(rec.Events)}
	sources := map[string]sessions.Source{}
	for _, e := range rec.Events {
		if e.Type == session.DecisionRecorded && e.Decision != nil && e.Decision.Stage == session.StageAdmission && e.Decision.Source != nil {
			sources[e.Decision.RequestID] = sourceOf(e.Decision.Source)
		}
	}
	add := func(e session.Event, steer bool, turn string) {
		if e.Message == nil {
			return
		}
		p := prompt{requestID: requestOf(e), content: e.Message.Content, steer: steer, turn: turn}
		src, ok := sources[p.requestID]
		if !ok {
			// A log written before decision records names no sender:
			// replay it as a person's, as the CLI sends it.
			src = sessions.Source{Kind: sessions.SourceUser, Unattended: e.Message.Unattended}
		}
		p.source = src
		s.prompts = append(s.prompts, p)
	}
	for _, e := range rec.Events {
		turn := s.turnReq[e.Turn]
		switch e.Type {
		case session.UserMessage:
			add(e, false, turn)
		case session.SteeringMessage:
			add(e, true, turn)
		case session.MessageRefused, session.MessageExpired:
			add(e, false, "")
		case session.AssistantMessage:
			if e.Message != nil {
				s.replies[turn] = append(s.replies[turn], reply{msg: *e.Message, usage: e.Usage, finish: e.Finish})
				s.steps++
				if s.model == "" {
					s.model = e.Model
				}
			}
		case session.ToolResult:
			if e.Message != nil {
				if s.results[turn] == nil {
					s.results[turn] = map[string][]llm.Message{}
				}
				s.results[turn][e.Message.ToolCallID] = append(s.results[turn][e.Message.ToolCallID], *e.Message)
			}
		case session.TurnEnd:
			s.ends[turn] = e.Reason
		case session.DecisionRecorded:
			if e.Decision == nil {
				continue
			}
			s.decisions = append(s.decisions, e)
			if e.Decision.Stage == session.StageAnswer {
				if s.answers[turn] == nil {
					s.answers[turn] = map[string][]session.Decision{}
				}
				s.answers[turn][e.Decision.CallID] = append(s.answers[turn][e.Decision.CallID], *e.Decision)
			}
		}
	}
	return s
}

// answerOf is the recorded answer d as the approval service takes it.
func answerOf(d session.Decision) approval.Answer {
	switch approval.Choice(d.Verdict) {
	case approval.AllowOnce, approval.AllowSession:
		return approval.Answer{Choice: approval.Choice(d.Verdict), Reason: d.Reason}
	}
	return approval.Answer{Choice: approval.Deny, Reason: d.Reason, Unattended: d.Policy == "nobody"}
}

// sourceOf is the sender a record names, as the session service takes it.
func sourceOf(s *session.Sender) sessions.Source {
	src := sessions.Source{Kind: sessions.SourceKind(s.Kind), RPCID: s.RPCID, Unattended: s.Unattended, Entry: s.Entry}
	if p := s.Principal; p != nil {
		src.Principal = sessions.Principal{Kind: p.Kind, ID: p.ID, Tenant: p.Tenant}
	}
	if p := s.OnBehalfOf; p != nil {
		src.OnBehalfOf = &sessions.Principal{Kind: p.Kind, ID: p.ID, Tenant: p.Tenant}
	}
	return src
}
