package nats

import (
	stdctx "context"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
)

// BenchmarkLookup is what a claim or another host's read of one session
// costs with n sessions of 20 events stored: list (serve's lookup goes
// through the listing), find (by key), load (one log).
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 200, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			srv := natstest.Single(b)
			st := testStore(b, srv.ClientURL(), "LOOKUP")
			storeSessions(b, st, 0, n, 20)
			ctx := stdctx.Background()
			id := fmt.Sprintf("s%04d", n/2)
			b.Run("list", func(b *testing.B) {
				for range b.N {
					if list, err := st.List(ctx); err != nil || len(list) != n {
						b.Fatal(len(list), err)
					}
				}
			})
			b.Run("find", func(b *testing.B) {
				for range b.N {
					if _, found, err := st.Find(ctx, id); err != nil || !found {
						b.Fatal(found, err)
					}
				}
			})
			b.Run("load", func(b *testing.B) {
				for range b.N {
					if evs, err := st.Load(ctx, id); err != nil || len(evs) != 20 {
						b.Fatal(len(evs), err)
					}
				}
			})
		})
	}
}
