package live

import (
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// Codes of the live package.
const (
	// Overflow: the client fell further behind than its buffer allows and
	// was dropped; re-attach with AfterSeq set to Client.LastSeq.
	Overflow errs.Code = "LIVE_CLIENT_OVERFLOW"
	// Detached: the client detached itself.
	Detached errs.Code = "LIVE_DETACHED"
	// HubClosed: the Hub was closed or its agent disposed.
	HubClosed errs.Code = "LIVE_HUB_CLOSED"
	// BadSeq: AfterSeq names an event the session does not have.
	BadSeq errs.Code = "LIVE_BAD_SEQ"
	// LoadFailed: events older than the Hub's window could not be read.
	LoadFailed errs.Code = "LIVE_LOAD_FAILED"
	// QuestionClosed: the approval question was already answered or
	// withdrawn.
	QuestionClosed errs.Code = "LIVE_QUESTION_CLOSED"
	// NotApprover: the client did not attach to answer approvals.
	NotApprover errs.Code = "LIVE_NOT_APPROVER"
)

// Kind says what an Update carries.
type Kind string

// Update kinds.
const (
	KindEvent    Kind = "event"    // Event: a durable session event
	KindNotice   Kind = "notice"   // Notice: a session-visible outcome
	KindSnapshot Kind = "snapshot" // Snapshot: the message in flight so far
	KindChunk    Kind = "chunk"    // Chunk: one chunk of the message in flight
	KindQuestion Kind = "question" // Question: an approval request to answer
	KindSettled  Kind = "settled"  // Settled: a question was answered or withdrawn
	// ToolStart: a tool call passed approval and starts running; like a
	// chunk it is transient, sent to the clients attached then.
	KindToolStart Kind = "tool-start"
)

// Update is one element of a client's stream. Only the field of its Kind
// is set. Pointed-to values are shared between clients: read them, never
// write them.
type Update struct {
	Kind Kind `json:"kind"`
	// Seq is the sequence number of a KindEvent.
	Seq       int64          `json:"seq,omitempty"`
	Event     *session.Event `json:"event,omitempty"`
	Chunk     Chunk          `json:"chunk,omitzero"`
	Snapshot  *Snapshot      `json:"snapshot,omitempty"`
	Notice    *Notice        `json:"notice,omitempty"`
	Question  *Question      `json:"question,omitempty"`
	Settled   *Settled       `json:"settled,omitempty"`
	ToolStart *ToolStart     `json:"tool_start,omitempty"`
}

// ToolStart is a tool call that starts running: it passed validation and
// approval, and tools/execute took it. Its tool/call event is durable
// already; its tool/result follows.
type ToolStart struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Turn   int    `json:"turn,omitempty"`
}

// Chunk is a transient stream chunk: Index is its position in the message
// MessageID, counting from 0.
type Chunk struct {
	MessageID string    `json:"message_id"`
	Index     int       `json:"index"`
	Turn      int       `json:"turn"`
	Step      int       `json:"step"`
	Chunk     llm.Chunk `json:"chunk"`
}

// Snapshot is the message being streamed, assembled from its chunks
// 0..Next-1: the client replaces what it assembled for MessageID with
// Message and applies only chunks with Index >= Next.
type Snapshot struct {
	MessageID string      `json:"message_id"`
	Turn      int         `json:"turn"`
	Step      int         `json:"step"`
	Next      int         `json:"next"`
	Message   llm.Message `json:"message"`
}

// Notice is a session-visible outcome that is not a log event, such as
// session/prompt-rejected. The Hub assigns ID (increasing), AfterSeq (the
// last durable seq when it was published) and Time when zero.
type Notice struct {
	ID        int64     `json:"id"`
	Type      string    `json:"type"`
	RequestID string    `json:"request_id,omitempty"`
	Code      string    `json:"code,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	AfterSeq  int64     `json:"after_seq"`
	Time      time.Time `json:"time"`
}

// Question is an approval request for the approving clients; answer it
// with Client.Answer(ID, ...).
type Question struct {
	ID      int64            `json:"id"`
	Request approval.Request `json:"request"`
}

// Settled closes a question for a client that did not answer it: another
// client answered (AnsweredBy, Answer), or the call was cancelled
// (Withdrawn).
type Settled struct {
	QuestionID int64           `json:"question_id"`
	AnsweredBy string          `json:"answered_by,omitempty"`
	Answer     approval.Answer `json:"answer"`
	Withdrawn  bool            `json:"withdrawn,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}
