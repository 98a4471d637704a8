package serve_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
)

// BenchmarkTenantCheck prices the tenant check of a route that names a
// session: GET /v1/sessions/{id} of a stored, open session, through the
// whole handler (auth included), for a caller with a tenant and, as the
// floor measured in the same run, for an operator, whose request skips
// the check. ratio is the tenant's wall time over the floor's, cpu-ratio
// the same of CPU time.
func BenchmarkTenantCheck(b *testing.B) {
	e := newEnv(b, envOpts{tokens: tenantTokens})
	id := e.openAs(aliceToken, map[string]any{})
	e.send(id, "r-1", "hi")
	e.waitEvents(id, "the turn's end", turnsEnded(1))
	h := e.srv.Handler()
	run := func(token string, n int) (wall, cpu time.Duration) {
		req := httptest.NewRequest("GET", "/v1/sessions/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		c0, w0 := testkit.CPUTime(), time.Now()
		for range n {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("%d %s", rec.Code, rec.Body)
			}
		}
		return time.Since(w0), testkit.CPUTime() - c0
	}
	run(aliceToken, 100)
	run(e.token, 100)
	b.ReportAllocs()
	b.ResetTimer()
	wall, cpu := run(aliceToken, b.N)
	b.StopTimer()
	fwall, fcpu := run(e.token, b.N)
	n := float64(b.N)
	b.ReportMetric(float64(cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(fwall)/n, "floor-ns/op")
	b.ReportMetric(float64(fcpu)/n, "floor-cpu-ns/op")
	b.ReportMetric(float64(wall)/float64(fwall), "ratio")
	b.ReportMetric(float64(cpu)/float64(fcpu), "cpu-ratio")
}
