package webhook_test

import (
	"bytes"
	stdctx "context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkDeliverySpool measures what the spool adds to a delivery's
// answer: a webhook without session: (each delivery opens its own
// session, the default) answered 202, with the spool (its record written
// and synced, the directory synced) and without. The floor is the run
// without; compare the two in one run (go test -bench DeliverySpool
// -count 3 ./serve/webhook/).
func BenchmarkDeliverySpool(b *testing.B) {
	for _, spooled := range []bool{false, true} {
		b.Run(fmt.Sprintf("spool=%v", spooled), func(b *testing.B) {
			yaml := baseIn(b.TempDir(), "", "") + hooks
			cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
			if err != nil {
				b.Fatal(err)
			}
			h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(stdctx.Background())
			dir := ""
			if spooled {
				dir = filepath.Join(b.TempDir(), "spool")
			}
			hk, err := webhook.New(webhook.Options{Sessions: h.Sessions(), Config: cfg, Getenv: func(string) string { return secret }, Spool: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
				defer cancel()
				hk.Close(ctx)
			}()
			bodies := make([][]byte, b.N)
			for i := range bodies {
				bodies[i] = []byte(fmt.Sprintf("delivery %d", i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := testkit.CPUTime()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest(http.MethodPost, "/hooks/fresh", bytes.NewReader(bodies[i]))
				req.Header.Set("X-Hub-Signature-256", sign(secret, bodies[i]))
				rec := httptest.NewRecorder()
				hk.ServeHTTP(rec, req)
				if rec.Code != http.StatusAccepted {
					b.Fatalf("delivery %d: %d %s", i, rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(testkit.CPUTime()-cpu)/float64(b.N), "cpu-ns/op")
			b.StopTimer()
		})
	}
}
