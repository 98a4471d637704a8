package nats

import (
	stdctx "context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// batchStore is a store on a fresh stream of three replicas, where a
// checkpoint goes as one atomic batch, and a writer holding session s1.
func batchStore(t *testing.T, stream string) (*store, *writer) {
	t.Helper()
	c := natstest.Start(t, 3)
	cfg := Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.SubjectPrefix, cfg.Replicas = c.URL(0), stream, "dsh."+strings.ToLower(stream), 3
	st, err := connect(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	if !st.atomic.Load() {
		t.Fatal("a stream of three replicas on nats-server 2.15 should take atomic batches")
	}
	wr, err := st.lock(stdctx.Background(), "s1", false)
	if err != nil {
		t.Fatal(err)
	}
	return st, wr
}

// step is three events from seq on, the second with a 2 KB answer.
func step(seq int64) []session.Event {
	return []session.Event{
		{Seq: seq, Type: session.TurnStart, Turn: 1},
		{Seq: seq + 1, Type: session.AssistantMessage, Turn: 1, Message: &llm.Message{Role: llm.RoleAssistant, Content: strings.Repeat("x", 2048)}},
		{Seq: seq + 2, Type: session.TurnEnd, Turn: 1},
	}
}

func seqs(t *testing.T, st *store) []int64 {
	t.Helper()
	events, err := st.Load(stdctx.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

// TestAMessageRefusedMidBatchStoresNoneOfTheStep: the stream refuses the
// second of a step's three messages (over its max message size). The
// flush fails with FlushFailed and the log holds nothing of the step — not
// its first event, which one message at a time would have stored — and
// the step stays pending: once the stream takes it, the next flush stores
// it whole, once.
func TestAMessageRefusedMidBatchStoresNoneOfTheStep(t *testing.T) {
	st, wr := batchStore(t, "MIDBATCH")
	ctx := stdctx.Background()
	info, err := st.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxMsgSize = 1024
	if _, err := st.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, e := range step(1) {
		wr.add("agent", "", e)
	}
	err = wr.write(ctx, 3)
	if !errs.HasCode(err, session.FlushFailed) {
		t.Fatalf("a step with a refused message: %v, want %s", err, session.FlushFailed)
	}
	if got := seqs(t, st); len(got) != 0 {
		t.Fatalf("the log holds events %v of the refused step, want none", got)
	}
	cfg.MaxMsgSize = -1
	if _, err := st.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := wr.write(ctx, 3); err != nil {
		t.Fatalf("the step once the stream takes it: %v", err)
	}
	if got := seqs(t, st); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("the log holds events %v, want 1, 2, 3 once each", got)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestAStepAfterAnotherWritersAppendIsRefusedWhole: someone else appends
// to the session's subject; the writer's next step — three messages sent
// without waiting — is refused whole: the writer is fenced and none of the
// step follows the other writer's message.
func TestAStepAfterAnotherWritersAppendIsRefusedWhole(t *testing.T) {
	st, wr := batchStore(t, "FENCEBATCH")
	ctx := stdctx.Background()
	if _, err := st.js.Publish(ctx, wr.subject, []byte(`{"seq":1,"type":"turn/start"}`)); err != nil {
		t.Fatal(err)
	}
	for _, e := range step(1) {
		wr.add("agent", "", e)
	}
	err := wr.write(ctx, 3)
	if !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("a step after another writer's append: %v, want %s (%s)", err, session.SessionLocked, session.ReasonFenced)
	}
	if got := seqs(t, st); len(got) != 1 {
		t.Fatalf("the log holds events %v, want only the other writer's", got)
	}
	wr.Release()
}

// TestABatchWhoseAckWasLostIsNotStoredTwice: the first two messages of a
// step were stored by an earlier try whose ack never came back. The next
// flush finds them at the end of the subject, stores only the third and
// carries on; a later step goes as a batch again.
func TestABatchWhoseAckWasLostIsNotStoredTwice(t *testing.T) {
	st, wr := batchStore(t, "ACKLOSTBATCH")
	ctx := stdctx.Background()
	events := step(1)
	last := wr.last
	for _, e := range events[:2] {
		data, _ := json.Marshal(e)
		m := natsgo.NewMsg(wr.subject)
		m.Data = data
		m.Header.Set(agentHeader, "agent")
		ack, err := st.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(last), jetstream.WithMsgID(wr.lease.token+":"+strconv.FormatInt(e.Seq, 10)))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	for _, e := range events {
		wr.add("agent", "", e)
	}
	if err := wr.write(ctx, 3); err != nil {
		t.Fatalf("the retry of a partly stored step: %v", err)
	}
	for _, e := range step(4) {
		wr.add("agent", "", e)
	}
	if err := wr.write(ctx, 6); err != nil {
		t.Fatalf("the next step: %v", err)
	}
	got := seqs(t, st)
	want := []int64{1, 2, 3, 4, 5, 6}
	if len(got) != len(want) {
		t.Fatalf("the log holds events %v, want %v — each once", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("the log holds events %v, want %v — each once", got, want)
		}
	}
	if wr.last != last+4 {
		t.Fatalf("the writer expects sequence %d next, want %d", wr.last, last+4)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestAStreamWithoutAtomicBatchesTakesTheStepOneByOne: another host set
// the stream up again without allow_atomic (an older dsh). The refused
// batch is published one message at a time, whole, and the writer stops
// trying batches.
func TestAStreamWithoutAtomicBatchesTakesTheStepOneByOne(t *testing.T) {
	st, wr := batchStore(t, "NOATOMIC")
	ctx := stdctx.Background()
	info, err := st.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.AllowAtomicPublish = false
	if _, err := st.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, e := range step(1) {
		wr.add("agent", "", e)
	}
	if err := wr.write(ctx, 3); err != nil {
		t.Fatalf("a step on a stream without atomic batches: %v", err)
	}
	if st.atomic.Load() {
		t.Fatal("the store still sends atomic batches to a stream that refuses them")
	}
	if got := seqs(t, st); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("the log holds events %v, want 1, 2, 3 once each", got)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestABatchOfOneCarriesTheFence: the remainder of a step an earlier try
// stored in part can be a single message; sent as a batch of one, it
// must still expect the subject's last sequence, or it lands after
// another writer's append.
func TestABatchOfOneCarriesTheFence(t *testing.T) {
	st, wr := batchStore(t, "ONEBATCH")
	ctx := stdctx.Background()
	if _, err := st.js.Publish(ctx, wr.subject, []byte(`{"seq":1,"type":"turn/start"}`)); err != nil {
		t.Fatal(err)
	}
	e := session.Event{Seq: 1, Type: session.TurnStart, Turn: 1}
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	out := []outgoing{{event: e, data: data, id: wr.lease.token + ":1"}}
	if _, err := wr.commitBatch(ctx, out, author{agent: "agent"}, 0); apiCode(err) != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("a batch of one expecting an empty subject after another writer's append: %v, want wrong last sequence", err)
	}
	last, err := st.stream.GetLastMsgForSubject(ctx, wr.subject)
	if err != nil || string(last.Data) != `{"seq":1,"type":"turn/start"}` {
		t.Fatalf("the subject's last message: %+v %v, want only the other writer's", last, err)
	}
	wr.Release()
}

// serverAtLeast decides whether the stream asks for atomic batches; an
// older server would drop the setting and every start would update the
// stream again.
func TestServerAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"2.12.0": true, "2.12.3": true, "2.14.0-beta.1": true, "3.0.0": true,
		"2.11.9": false, "2.9.25": false, "1.20.0": false, "": false, "dev": false} {
		if got := serverAtLeast(v, 2, 12); got != want {
			t.Errorf("serverAtLeast(%q, 2, 12) = %v, want %v", v, got, want)
		}
	}
}
