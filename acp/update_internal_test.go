package acp

import (
	"bytes"
	stdctx "context"
	"io"
	"testing"

	"github.com/coder/acp-go-sdk"
)

// The pump's own encoding of a text chunk is byte for byte what the SDK
// writes for the same update.
func TestTextUpdateIsTheSDKs(t *testing.T) {
	texts := []string{"", "first ", "<a href=\"x\">&amp;</a>", "line\nbreak\ttab\r\x00\x1f", "naïve 日本語 🙂", "\u2028\u2029", "bad \xff\xfe utf-8 \xed\xa0\x80 cut \xe6\x97", `back\slash "quote"`}
	var tu textUpdate
	for _, text := range texts {
		for _, c := range []struct {
			kind string
			u    acp.SessionUpdate
		}{{"agent_message_chunk", acp.UpdateAgentMessageText(text)}, {"agent_thought_chunk", acp.UpdateAgentThoughtText(text)}} {
			var sdk bytes.Buffer
			conn := acp.NewAgentSideConnection(nil, &sdk, eofReader{})
			if err := conn.SessionUpdate(stdctx.Background(), acp.SessionNotification{SessionId: "s-<1>", Update: c.u}); err != nil {
				t.Fatal(err)
			}
			if got := tu.encode("s-<1>", c.kind, text); !bytes.Equal(got, sdk.Bytes()) {
				t.Errorf("%s %q:\n got %s\nwant %s", c.kind, text, got, sdk.Bytes())
			}
		}
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func BenchmarkTextUpdate(b *testing.B) {
	b.Run("sdk", func(b *testing.B) {
		conn := acp.NewAgentSideConnection(nil, io.Discard, eofReader{})
		b.ReportAllocs()
		for range b.N {
			conn.SessionUpdate(stdctx.Background(), acp.SessionNotification{SessionId: "main-session-00000000", Update: acp.UpdateAgentMessageText("first ")})
		}
	})
	b.Run("pump", func(b *testing.B) {
		var tu textUpdate
		b.ReportAllocs()
		for range b.N {
			io.Discard.Write(tu.encode("main-session-00000000", "agent_message_chunk", "first "))
		}
	})
}
