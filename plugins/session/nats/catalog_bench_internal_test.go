package nats

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// genSessions stores n sessions of one message each, of 10 agents, and
// their index entries, published straight to the stream and to the index
// bucket's stream (a writer would take four requests a session).
func genSessions(tb testing.TB, st *store, n int) {
	tb.Helper()
	ctx := stdctx.Background()
	for i := range n {
		id := fmt.Sprintf("g%06d", i)
		subject, _ := st.subject(id)
		if _, err := st.js.PublishAsync(subject, []byte(`{}`)); err != nil {
			tb.Fatal(err)
		}
		x, _ := genEntry(i, n)
		b, _ := json.Marshal(x)
		if _, err := st.js.PublishAsync("$KV."+IndexBucket(st.cfg.Stream)+"."+id, b); err != nil {
			tb.Fatal(err)
		}
		if i%1000 == 999 {
			select {
			case <-st.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				tb.Fatal("publishing stalled")
			}
		}
	}
	select {
	case <-st.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatal("publishing stalled")
	}
	_ = ctx
	genCatalog(tb, st, n)
}

// genEntry is the index entry of the i-th of n generated sessions, of 10
// agents, and when its writer stored it: a second apart, in an order that
// is not the ids'. Its update is up to 30 s before or after that, as clocks
// of hosts differ, so the catalog is not quite in the order of updates.
func genEntry(i, n int) (x indexEntry, stored time.Time) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	stored = t0.Add(time.Duration(i*7919%n) * time.Second)
	at := stored.Add(time.Duration(i*31%61-30) * time.Second)
	// The log stream holds these sessions only, one message each.
	return indexEntry{Agent: fmt.Sprintf("agent%d", i%10), Title: fmt.Sprintf("task %d: summarize the design", i),
		Created: at, Updated: at, Turns: 1, Events: 1, Msgs: 1, Ended: true, Size: 2, Born: uint64(i + 1), Last: uint64(i + 1)}, stored
}

// genCatalog stores the catalog entries of the n generated sessions as
// their writers would have: in the order they were stored, each marked
// with its writer's clock then plus catalogSkew.
func genCatalog(tb testing.TB, st *store, n int) {
	tb.Helper()
	order := make([]int, n)
	for i := range n {
		order[i*7919%n] = i
	}
	for k, i := range order {
		x, stored := genEntry(i, n)
		b, _ := json.Marshal(catalogEntry{indexEntry: x, Mark: stored.Add(catalogSkew)})
		if _, err := st.js.PublishAsync(st.cat.entrySubject(x.Agent, fmt.Sprintf("g%06d", i)), b); err != nil {
			tb.Fatal(err)
		}
		if k%1000 == 999 {
			select {
			case <-st.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				tb.Fatal("publishing stalled")
			}
		}
	}
	select {
	case <-st.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		tb.Fatal("publishing stalled")
	}
}

// BenchmarkNATSList lists 100,000 sessions stored in session.nats (issue
// 38: a page of one agent's sessions in 100 ms). "floor-subjects" is the
// one request that names the stored sessions (the stream's subjects with
// their counts); "list" is List, which reads those, the whole index and
// the leases. "catalog-page-*" are ListPage (pages.go): the first page of
// one agent, of all agents, the tenth page of one agent, and the first
// page while 100 sessions are held. "page-agent-50" is the page cut from
// List. The server runs in this process, so CPU counts its work too.
//
//	go test -run '^$' -bench NATSList -benchtime 5x -count 3 ./plugins/session/nats/
func BenchmarkNATSList(b *testing.B) {
	const n = 100_000
	srv := natstest.Single(b)
	st := testStore(b, srv.ClientURL(), "CATBENCH")
	genSessions(b, st, n)
	ctx := stdctx.Background()
	cpu := func(b *testing.B, start time.Duration) {
		b.ReportMetric(float64(testkit.CPUTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "wall-ms/op")
	}
	b.Run("floor-subjects", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			info, err := st.stream.Info(ctx, jetstream.WithSubjectFilter(st.cfg.SubjectPrefix+".>"))
			if err != nil || len(info.State.Subjects) != n {
				b.Fatalf("%d subjects (%v)", len(info.State.Subjects), err)
			}
		}
		cpu(b, start)
	})
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			list, err := st.List(ctx)
			if err != nil || len(list) != n {
				b.Fatalf("listed %d (%v)", len(list), err)
			}
		}
		cpu(b, start)
	})
	b.Run("catalog-page-agent-50", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			p, err := st.ListPage(ctx, session.ListOptions{Agent: "agent3", Limit: 50})
			if err != nil || len(p.Sessions) != 50 || p.Next == "" {
				b.Fatalf("a page of %d (%v)", len(p.Sessions), err)
			}
		}
		cpu(b, start)
	})
	b.Run("catalog-page-all-50", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			p, err := st.ListPage(ctx, session.ListOptions{Limit: 50})
			if err != nil || len(p.Sessions) != 50 {
				b.Fatalf("a page of %d (%v)", len(p.Sessions), err)
			}
		}
		cpu(b, start)
	})
	b.Run("catalog-page-agent-50-tenth", func(b *testing.B) {
		// The tenth page: each page reads the tail down to its own end.
		cursor := ""
		for range 9 {
			p, err := st.ListPage(ctx, session.ListOptions{Agent: "agent3", Limit: 50, Cursor: cursor})
			if err != nil {
				b.Fatal(err)
			}
			cursor = p.Next
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := testkit.CPUTime()
		for range b.N {
			p, err := st.ListPage(ctx, session.ListOptions{Agent: "agent3", Limit: 50, Cursor: cursor})
			if err != nil || len(p.Sessions) != 50 {
				b.Fatalf("a page of %d (%v)", len(p.Sessions), err)
			}
		}
		cpu(b, start)
	})
	b.Run("catalog-page-agent-50-100-held", func(b *testing.B) {
		// 100 sessions held by writers, so marked open: each is checked
		// against its log whatever its agent.
		var held []*writer
		for i := range 100 {
			wr, err := st.lock(ctx, fmt.Sprintf("g%06d", i*997%n), false)
			if err != nil {
				b.Fatal(err)
			}
			held = append(held, wr)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := testkit.CPUTime()
		for range b.N {
			p, err := st.ListPage(ctx, session.ListOptions{Agent: "agent3", Limit: 50})
			if err != nil || len(p.Sessions) != 50 {
				b.Fatalf("a page of %d (%v)", len(p.Sessions), err)
			}
		}
		cpu(b, start)
		b.StopTimer()
		for _, wr := range held {
			if err := wr.Release(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page-agent-50", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			list, err := st.List(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if p, _ := session.Paginate(list, session.ListOptions{Agent: "agent3", Limit: 50}); len(p.Sessions) != 50 {
				b.Fatalf("a page of %d", len(p.Sessions))
			}
		}
		cpu(b, start)
	})
}
