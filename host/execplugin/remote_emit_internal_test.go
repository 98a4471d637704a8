package execplugin

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
)

func chunkReq(text string) *pluginv1.EmitRequest {
	return &pluginv1.EmitRequest{Event: streamChunkEvent, Payload: &pluginv1.Payload{Event: &pluginv1.Payload_StreamChunk{
		StreamChunk: &pluginv1.StreamChunk{Chunk: &pluginv1.Chunk{Kind: "text", Text: text}}}}}
}

// TestGatherTakesWhatIsQueuedInOrder: queued notifications go in one
// batch, in order, past chunkBatch; a batch that ends with something other
// than a chunk does not wait.
func TestGatherTakesWhatIsQueuedInOrder(t *testing.T) {
	r := newRemote(config.Entry{ID: "p"}, hclog.NewNullLogger())
	first := chunkReq("0")
	for i := 1; i < 3*chunkBatch; i++ {
		r.enqueueEmit(chunkReq(strings.Repeat("x", i)))
	}
	r.enqueueEmit(&pluginv1.EmitRequest{Event: "agent/status"})
	pending, carry, stopped := r.gather(first)
	if stopped || carry != nil || len(pending) != 3*chunkBatch+1 {
		t.Fatalf("%d pending, carry %v, stopped %v", len(pending), carry, stopped)
	}
	for i, p := range pending[1 : len(pending)-1] {
		if got := p.GetPayload().GetStreamChunk().GetChunk().GetText(); len(got) != i+1 {
			t.Fatalf("pending[%d] is %q: out of order", i+1, got)
		}
	}
}

// TestGatherStopsAtTheByteBound: a notification that would make the batch
// bigger than maxBatchBytes is carried to the next one.
func TestGatherStopsAtTheByteBound(t *testing.T) {
	r := newRemote(config.Entry{ID: "p"}, hclog.NewNullLogger())
	big := func() *pluginv1.EmitRequest {
		return &pluginv1.EmitRequest{Event: "session/event", Payload: &pluginv1.Payload{Event: &pluginv1.Payload_SessionEvent{
			SessionEvent: &pluginv1.SessionAppended{Event: &pluginv1.SessionEvent{Error: strings.Repeat("e", maxBatchBytes*2/3)}}}}}
	}
	second := big()
	r.enqueueEmit(second)
	pending, carry, _ := r.gather(big())
	if len(pending) != 1 || carry != second {
		t.Fatalf("%d pending, carry is the second: %v", len(pending), carry == second)
	}
}

// TestGatherAbandonsALingeringBatchWhenStopped: dsh stopping ends the wait
// for more chunks at once.
func TestGatherAbandonsALingeringBatchWhenStopped(t *testing.T) {
	r := newRemote(config.Entry{ID: "p"}, hclog.NewNullLogger())
	close(r.stop)
	if _, _, stopped := r.gather(chunkReq("a")); !stopped {
		t.Fatal("a stopped sender kept lingering")
	}
}
