package session_test

import (
	stdctx "context"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// signedLog writes a conversation with three decision records between its
// events, signed by a fresh key, and returns the log through a JSON round
// trip (as a store keeps it) with the public key.
func signedLog(t *testing.T) ([]session.Event, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	scope, _ := root.Scoped("agent-1")
	st := session.NewStore()
	signer, err := session.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetSigner(root, signer); err != nil {
		t.Fatal(err)
	}
	s, err := st.Create(scope, "agent-1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := stdctx.Background()
	src := &session.Sender{Kind: "user", Entry: "cli", Principal: &llm.Principal{Kind: "user", ID: "alice"}}
	conv := conversation()
	s.AppendDecision(ctx, 1, 0, session.Decision{Stage: session.StageAdmission, Verdict: "admit", Inputs: session.InputsDigest("hi"), RequestID: "r1", Source: src})
	for i, e := range conv {
		if e.Type == session.ToolResult {
			s.AppendDecision(ctx, 1, 1, session.Decision{Stage: session.StageApproval, Verdict: "allow", Policy: "tools.permission", Inputs: session.InputsDigest("clock {}"), CallID: "c1", Tool: "clock"})
			s.AppendDecision(ctx, 1, 1, session.Decision{Stage: session.StageApproval, Verdict: "deny", Reason: "no", Inputs: session.InputsDigest("bash"), CallID: "c2", Tool: "bash"})
		}
		s.Append(ctx, conv[i])
	}
	b, err := json.Marshal(s.Events(1))
	if err != nil {
		t.Fatal(err)
	}
	var out []session.Event
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, pub
}

func decisionSeqs(events []session.Event) []int64 {
	var out []int64
	for _, e := range events {
		if e.Type == session.DecisionRecorded {
			out = append(out, e.Seq)
		}
	}
	return out
}

func badSeq(t *testing.T, err error) int64 {
	t.Helper()
	e, ok := err.(*errs.Error)
	if !ok || e.Code != session.BadRecord {
		t.Fatalf("want %s, got %v", session.BadRecord, err)
	}
	seq, _ := e.Details["seq"].(int64)
	return seq
}

func TestSignedRecordsVerifyAndTheHistoryIgnoresThem(t *testing.T) {
	events, pub := signedLog(t)
	v, err := session.VerifyDecisions("s1", events, pub)
	if err != nil {
		t.Fatal(err)
	}
	if v.Records != 3 || v.Signed != 3 || len(v.Keys) != 1 || v.Keys[0] != session.KeyID(pub) {
		t.Fatalf("verified %+v", v)
	}
	// A resume derives the same history as a log without the records.
	h, err := session.Replay(events)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := session.Replay(renumber(conversation()))
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != plain.Len() {
		t.Fatalf("history with records has %d messages, without %d", h.Len(), plain.Len())
	}
	// Another session's id does not verify: a record cannot be moved
	// between sessions.
	if _, err := session.VerifyDecisions("s2", events, pub); badSeq(t, err) != decisionSeqs(events)[0] {
		t.Fatal("records verified under another session id")
	}
}

func renumber(events []session.Event) []session.Event {
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	return events
}

func TestATamperedRecordFailsAtItsSeq(t *testing.T) {
	events, pub := signedLog(t)
	second := decisionSeqs(events)[1]
	events[second-1].Decision.Verdict = "deny"
	_, err := session.VerifyDecisions("s1", events, pub)
	if got := badSeq(t, err); got != second {
		t.Fatalf("reported seq %d, want %d (%v)", got, second, err)
	}
	if !strings.Contains(err.Error(), "changed") {
		t.Fatalf("message does not say the record changed: %v", err)
	}
	// Without a key the digest still catches it.
	if _, err := session.VerifyDecisions("s1", events, nil); badSeq(t, err) != second {
		t.Fatalf("unkeyed check: %v", err)
	}
}

func TestARemovedRecordFailsAtTheNextOne(t *testing.T) {
	events, pub := signedLog(t)
	seqs := decisionSeqs(events)
	var cut []session.Event
	for _, e := range events {
		if e.Seq != seqs[1] {
			cut = append(cut, e)
		}
	}
	_, err := session.VerifyDecisions("s1", cut, pub)
	if got := badSeq(t, err); got != seqs[2] {
		t.Fatalf("reported seq %d, want %d (%v)", got, seqs[2], err)
	}
	if !strings.Contains(err.Error(), "removed") {
		t.Fatalf("message does not say a record was removed: %v", err)
	}
	// Swapping two records is caught too.
	swapped := append([]session.Event(nil), events...)
	swapped[seqs[1]-1].Decision, swapped[seqs[2]-1].Decision = swapped[seqs[2]-1].Decision, swapped[seqs[1]-1].Decision
	if _, err := session.VerifyDecisions("s1", swapped, pub); badSeq(t, err) != seqs[1] {
		t.Fatalf("swap: %v", err)
	}
}

func TestAWrongKeyFailsAtTheFirstRecord(t *testing.T) {
	events, _ := signedLog(t)
	other, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = session.VerifyDecisions("s1", events, other)
	if got := badSeq(t, err); got != decisionSeqs(events)[0] {
		t.Fatalf("reported seq %d (%v)", got, err)
	}
	if !strings.Contains(err.Error(), "signed by key") {
		t.Fatalf("message does not name the signing key: %v", err)
	}
}

func TestAResumedSessionContinuesTheChain(t *testing.T) {
	events, pub := signedLog(t)
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	scope, _ := root.Scoped("agent-1")
	st := session.NewStore()
	s, err := st.Restore(scope, "agent-1", "s1", events)
	if err != nil {
		t.Fatal(err)
	}
	s.AppendDecision(stdctx.Background(), 2, 0, session.Decision{Stage: session.StageAdmission, Verdict: "admit", Inputs: session.InputsDigest("again")})
	all := s.Events(1)
	// Unsigned after the resume (this store has no signer): the chain
	// holds without a key, and a key check names the unsigned record.
	if v, err := session.VerifyDecisions("s1", all, nil); err != nil || v.Records != 4 {
		t.Fatalf("resumed chain: %+v %v", v, err)
	}
	if _, err := session.VerifyDecisions("s1", all, pub); badSeq(t, err) != int64(len(all)) {
		t.Fatalf("unsigned record under a key: %v", err)
	}
}

func TestASignerNeverShowsItsKey(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	s, err := session.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{s.String(), s.GoString()} {
		if strings.Contains(text, string(priv)) || !strings.Contains(text, s.ID()) {
			t.Fatalf("signer shows %q", text)
		}
	}
	if _, err := session.NewSigner(priv[:10]); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("short key: %v", err)
	}
}

// TestTheSourceIsCanonicalWhateverItsKeyOrder: a store or a tool that
// re-encodes the log with another key order or spacing keeps the records
// valid; only a changed value breaks them.
func TestTheSourceIsCanonicalWhateverItsKeyOrder(t *testing.T) {
	events, pub := signedLog(t)
	first := decisionSeqs(events)[0]
	line, err := json.Marshal(events[first-1])
	if err != nil {
		t.Fatal(err)
	}
	// The same source spelled with its keys in another order and spaces.
	const source = `"source":{"kind":"user","principal":{"kind":"user","id":"alice"},"entry":"cli"}`
	if !strings.Contains(string(line), source) {
		t.Fatalf("the record reads %s", line)
	}
	respelled := strings.Replace(string(line), source, `"source":{ "entry": "cli", "principal": {"id":"alice","kind":"user"}, "kind":"user" }`, 1)
	if err := json.Unmarshal([]byte(respelled), &events[first-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := session.VerifyDecisions("s1", events, pub); err != nil {
		t.Fatalf("the same source spelled otherwise: %v", err)
	}
	changed := strings.Replace(string(line), `"id":"alice"`, `"id":"mallory"`, 1)
	if err := json.Unmarshal([]byte(changed), &events[first-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := session.VerifyDecisions("s1", events, pub); badSeq(t, err) != first {
		t.Fatalf("a changed source: %v", err)
	}
}
