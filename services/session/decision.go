package session

import (
	stdctx "context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// DecisionRecorded is a decision record: what the admission stage decided
// about a message, what the approval stage decided about a tool call, or
// how a person (or whoever stands in for one) answered a call the stage
// asked about. Decision holds it. It is not part of the history: a resume
// skips it, and a log written before records existed simply has none.
const DecisionRecorded Type = "decision"

// Stages of a decision record.
const (
	// StageAdmission: the agent controller's admission (and prepare)
	// stage decided about a message.
	StageAdmission = "admission"
	// StageApproval: tools/approve gave its verdict on a tool call.
	StageApproval = "approval"
	// StageAnswer: the call's Ask was answered (by a person, by whoever
	// stands in for nobody) or refused because nobody could answer.
	StageAnswer = "answer"
)

// BadRecord: a decision record fails verification — its digest, its chain
// or its signature does not hold. The error's details name the seq.
const BadRecord errs.Code = "SESSION_BAD_RECORD"

// Decision is a decision record, the Decision of a decision event.
//
// Inputs is a digest of what was decided about (the message or the call's
// name and arguments, with the provenance), so a record proves which input
// it judged without repeating it. Prev, Digest and Sig make the records of
// a session a chain: Digest is the sha256 of the record's canonical
// encoding (Canonical), which includes the session id, the event's seq and
// the previous record's Digest as Prev; Sig, when the host signs, is the
// ed25519 signature of the same bytes by the key KeyID names. A record
// edited, removed or moved breaks the digest of the next one.
type Decision struct {
	// Stage is admission, approval or answer.
	Stage string `json:"stage"`
	// Verdict is, for admission, admit, refuse or expire; for approval,
	// allow, deny, ask or error (the stage failed, which refuses); for an
	// answer, allow, allow-session or deny.
	Verdict string `json:"verdict"`
	// Reason is the decider's reason ("admission/rate-limited",
	// "policy/no-net"), or what the model was told.
	Reason string `json:"reason,omitempty"`
	// Policy and PolicyVersion name what decided and which version of its
	// rules (Decision.Policy / Verdict.Source, and their versions).
	Policy        string `json:"policy,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	// Inputs is "sha256:" and the hex digest of the decision's inputs.
	Inputs string `json:"inputs"`
	// RequestID and MessageID name the message of an admission decision;
	// CallID and Tool the call of an approval or an answer.
	RequestID string `json:"request_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Tool      string `json:"tool,omitempty"`
	// Mode is how an admitted message was to enter the inbox (followup or
	// steer).
	Mode string `json:"mode,omitempty"`
	// Source is the provenance of an admission decision's message, so a
	// replay can send the message again from the same sender.
	Source *Sender `json:"source,omitempty"`
	// Prev is the Digest of the session's previous decision record, ""
	// for its first.
	Prev string `json:"prev,omitempty"`
	// Digest is "sha256:" and the hex sha256 of Canonical.
	Digest string `json:"digest"`
	// Sig is the base64 ed25519 signature of Canonical, KeyID the first
	// 16 hex digits of the sha256 of the public key; both empty when the
	// host signs nothing.
	Sig   string `json:"sig,omitempty"`
	KeyID string `json:"key_id,omitempty"`
}

// Sender is who sent a message, as an admission record keeps it: the
// agent controller's Source (see agentcontroller.Source for each field),
// typed here so that the log and the canonical encoding spell it one way
// whoever wrote or re-encoded the log.
type Sender struct {
	Kind       string         `json:"kind,omitempty"`
	RPCID      string         `json:"rpc_id,omitempty"`
	Unattended bool           `json:"unattended,omitempty"`
	Principal  *llm.Principal `json:"principal,omitempty"`
	Entry      string         `json:"entry,omitempty"`
	OnBehalfOf *llm.Principal `json:"on_behalf_of,omitempty"`
}

// Decided is the payload of session/decision.
type Decided struct {
	// AgentID is the agent whose session records the decision.
	AgentID  string
	Decision Decision
	// WithOutcome: the stage hands the outcome the decision led to over
	// next, as an event under the decision's request id (a refusal's
	// message/refused, an expiry's message/expired). A recorder keeps the
	// record until that event comes and writes the two together, or
	// neither when its log is let go in between: a record without its
	// outcome would have a retry decided, and recorded, a second time.
	WithOutcome bool
}

// EventDecision is emitted, in the agent's scope, by the stage that made a
// decision: the agent controller for admission, the tools service for
// approval and answers. The agent loop hears it and appends the record to
// the agent's session from the one goroutine that appends; a listener
// (an audit plugin) may hear it too. Stages emit it whoever decided, so a
// plugin that decides is recorded without doing anything.
var EventDecision = waterfall.NewEmit[Decided]("session/decision")

// InputsDigest is the Inputs of a record: "sha256:" and the hex sha256 of
// v encoded as JSON (encoding/json writes struct fields in declaration
// order and map keys sorted, so the same inputs give the same digest).
func InputsDigest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Inputs are plain data; a value JSON cannot encode is a bug of
		// the stage that passed it, and the record says so rather than
		// claiming a digest.
		return "unencodable: " + err.Error()
	}
	return DigestOf(b)
}

// canonical is what a record's digest and signature cover, in a fixed
// field order. V is the encoding's version.
type canonical struct {
	V             int     `json:"v"`
	Session       string  `json:"session"`
	Seq           int64   `json:"seq"`
	Time          string  `json:"time"`
	Turn          int     `json:"turn,omitempty"`
	Step          int     `json:"step,omitempty"`
	Stage         string  `json:"stage"`
	Verdict       string  `json:"verdict"`
	Reason        string  `json:"reason,omitempty"`
	Policy        string  `json:"policy,omitempty"`
	PolicyVersion string  `json:"policy_version,omitempty"`
	Inputs        string  `json:"inputs"`
	RequestID     string  `json:"request_id,omitempty"`
	MessageID     string  `json:"message_id,omitempty"`
	CallID        string  `json:"call_id,omitempty"`
	Tool          string  `json:"tool,omitempty"`
	Mode          string  `json:"mode,omitempty"`
	Source        *Sender `json:"source,omitempty"`
	Prev          string  `json:"prev,omitempty"`
	KeyID         string  `json:"key_id,omitempty"`
}

// Canonical is the byte string a decision event's digest and signature
// cover: the record (without Digest and Sig), the session id, the event's
// seq, time, turn and step, as JSON in a fixed order. The time is written
// in UTC with nanoseconds, as every store keeps it.
func Canonical(sessionID string, e Event) []byte {
	d := e.Decision
	if d == nil {
		d = &Decision{}
	}
	b, _ := json.Marshal(canonical{
		V: 1, Session: sessionID, Seq: e.Seq, Time: e.Time.UTC().Format(time.RFC3339Nano), Turn: e.Turn, Step: e.Step,
		Stage: d.Stage, Verdict: d.Verdict, Reason: d.Reason, Policy: d.Policy, PolicyVersion: d.PolicyVersion,
		Inputs: d.Inputs, RequestID: d.RequestID, MessageID: d.MessageID, CallID: d.CallID, Tool: d.Tool, Mode: d.Mode,
		Source: d.Source, Prev: d.Prev, KeyID: d.KeyID,
	})
	return b
}

// DigestOf is "sha256:" and the hex sha256 of b, made in one
// allocation: it runs for every decision.
func DigestOf(b []byte) string {
	sum := sha256.Sum256(b)
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// Signer signs decision records with an ed25519 key. The key never leaves
// it: String and the records show the key id only.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// NewSigner returns a signer for key.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"a decision-signing key is an ed25519 private key of %d bytes; this one has %d", ed25519.PrivateKeySize, len(key)))
	}
	return &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}, nil
}

// KeyID names a public key in records: the first 16 hex digits of its
// sha256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// ID is the key id the signer's records carry.
func (s *Signer) ID() string { return s.id }

// String shows the key id, never the key.
func (s *Signer) String() string { return "ed25519 key " + s.id }

// GoString keeps the key out of %#v as well.
func (s *Signer) GoString() string { return s.String() }

// seal fills in e's chain, digest and signature; the caller holds s.mu and
// has set e.Seq and e.Time.
func (s *Session) seal(e *Event) {
	d := *e.Decision
	d.Prev, d.Digest, d.Sig, d.KeyID = s.lastDecision, "", "", ""
	if s.signer != nil {
		d.KeyID = s.signer.id
	}
	e.Decision = &d
	b := Canonical(s.id, *e)
	d.Digest = DigestOf(b)
	if s.signer != nil {
		d.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(s.signer.key, b))
	}
}

// AppendDecision records d as a decision event of the given turn and
// step, chained to the session's previous record and signed when the
// store has a signer. Like Append, it is called by the one goroutine that
// appends to the session (the agent loop's driver).
func (s *Session) AppendDecision(ctx stdctx.Context, turn, step int, d Decision) Event {
	s.mu.Lock()
	e := Event{Seq: int64(s.n) + 1, Type: DecisionRecorded, Time: time.Now(), Turn: turn, Step: step, Decision: &d}
	s.seal(&e)
	s.push(e)
	s.index(e)
	s.mu.Unlock()
	EventAppended.Emit(ctx, s.at, Appended{Session: s, Event: e})
	return e
}

// Verified is what VerifyDecisions found in a log that holds.
type Verified struct {
	// Records is how many decision records the log holds, Signed how
	// many of them carry a signature.
	Records, Signed int
	// Keys are the key ids the signatures name, in order of appearance.
	Keys []string
}

// VerifyDecisions checks the decision records of session sessionID's log:
// each record's Prev names the digest of the record before it, its Digest
// is that of its canonical encoding, and — when pub is given — it is
// signed by pub. It returns BadRecord for the first record that fails,
// with the record's seq in the details ("seq") and in the message. An
// unsigned log passes without pub; with pub, every record must be signed
// by it.
//
// The chain finds a record edited, removed, inserted or moved; records cut
// off the end of the log leave a shorter chain that still holds, which
// only a count kept elsewhere can tell.
func VerifyDecisions(sessionID string, events []Event, pub ed25519.PublicKey) (Verified, error) {
	var v Verified
	prev := ""
	keyID := ""
	if pub != nil {
		keyID = KeyID(pub)
	}
	for _, e := range events {
		if e.Type != DecisionRecorded {
			continue
		}
		bad := func(format string, args ...any) (Verified, error) {
			err := errs.New(BadRecord, fmt.Sprintf("session %q: decision record seq %d: ", sessionID, e.Seq)+fmt.Sprintf(format, args...))
			err.Details = map[string]any{"seq": e.Seq, "session": sessionID}
			return v, err
		}
		d := e.Decision
		if d == nil {
			return bad("the event holds no record")
		}
		if d.Prev != prev {
			if prev == "" {
				return bad("it names a previous record (%s) where none comes before it: a record before it was removed", short(d.Prev))
			}
			return bad("it names %s as the previous record, but the record before it is %s: a record between them was removed, inserted or moved", short(d.Prev), short(prev))
		}
		if got := DigestOf(Canonical(sessionID, e)); got != d.Digest {
			return bad("its content does not match its digest (%s, recomputed %s): the record was changed after it was written", short(d.Digest), short(got))
		}
		if d.Sig != "" {
			v.Signed++
			if len(v.Keys) == 0 || v.Keys[len(v.Keys)-1] != d.KeyID {
				v.Keys = append(v.Keys, d.KeyID)
			}
		}
		if pub != nil {
			if d.Sig == "" {
				return bad("it is not signed; a log checked against a key must be signed throughout")
			}
			sig, err := base64.StdEncoding.DecodeString(d.Sig)
			if err != nil || !ed25519.Verify(pub, Canonical(sessionID, e), sig) {
				if d.KeyID != keyID {
					return bad("its signature does not verify with key %s: it was signed by key %s", keyID, d.KeyID)
				}
				return bad("its signature does not verify with key %s: the record or its signature was changed", keyID)
			}
		}
		v.Records++
		prev = d.Digest
	}
	return v, nil
}

// short cuts a digest for a message.
func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	if d == "" {
		return "none"
	}
	return d
}
