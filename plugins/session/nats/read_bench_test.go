package nats

import (
	stdctx "context"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkReadLog reads one session of 96 events out of 1000 stored:
// "consumer" is Load's way, "getmsg" a request per message.
func BenchmarkReadLog(b *testing.B) {
	srv := natstest.Single(b)
	st := testStore(b, srv.ClientURL(), "READLOG")
	storeSessions(b, st, 0, 1000, 96)
	ctx := stdctx.Background()
	b.Run("consumer", func(b *testing.B) {
		for i := range b.N {
			if _, err := st.readLog(ctx, fmt.Sprintf("s%04d", i%1000)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("getmsg", func(b *testing.B) {
		for i := range b.N {
			subject := Subject(st.cfg.SubjectPrefix, fmt.Sprintf("s%04d", i%1000))
			last, _ := st.lastSeq(ctx, subject)
			for next := uint64(1); next <= last; {
				m, err := st.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
				if err != nil {
					b.Fatal(err)
				}
				next = m.Sequence + 1
			}
		}
	})
	b.Run("lastseq", func(b *testing.B) {
		for i := range b.N {
			st.lastSeq(ctx, Subject(st.cfg.SubjectPrefix, fmt.Sprintf("s%04d", i%1000)))
		}
	})
	b.Run("list", func(b *testing.B) {
		for range b.N {
			if _, err := st.list(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
