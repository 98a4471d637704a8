package cluster_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/services/sessions"
)

// BenchmarkServiceInfoForwarded: Service.Info on host b of a session host
// a runs — the owner from b's view of the leases, the request over NATS, the owner's Info, its
// "working" and final replies — beside, in the same run, the same call on
// a's own Service (local-ns/op) and a bare NATS round trip (floor-ns/op).
func BenchmarkServiceInfoForwarded(b *testing.B) {
	bc := startBenchCluster(b)
	floorWall, floorCPU := natsFloor(b, bc.srv, benchFloorOps)
	service := func(i int) *cluster.Service {
		s := cluster.NewService(bc.nodes[i].h.Sessions(), nil)
		s.Bind(bc.nodes[i].c)
		return s
	}
	local, remote := service(0), service(1)
	ctx := stdctx.Background()
	info := func(s *cluster.Service, i int) {
		if _, err := s.Info(ctx, bc.ids[i%len(bc.ids)]); err != nil {
			b.Fatal(err)
		}
	}
	n := benchFloorOps
	start := time.Now()
	for i := range n {
		info(local, i)
	}
	localWall := time.Since(start) / time.Duration(n)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := range b.N {
		info(remote, i)
	}
	wall, cpu := time.Since(start)/time.Duration(b.N), (cpuTime()-cpu0)/time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(wall), "wall-ns/op")
	b.ReportMetric(float64(cpu), "cpu-ns/op")
	b.ReportMetric(float64(localWall), "local-ns/op")
	b.ReportMetric(float64(floorWall), "floor-ns/op")
	b.ReportMetric(float64(floorCPU), "floor-cpu-ns/op")
	b.ReportMetric(float64(wall)/float64(floorWall), "x-floor")
	b.ReportMetric(float64(cpu)/float64(floorCPU), "cpu-x-floor")
}

// BenchmarkServiceTurnForwarded: Prompt then Turn.Wait on host b for a
// session host a runs, to the turn's end, beside the same on a's own
// Service (local-ns/op).
func BenchmarkServiceTurnForwarded(b *testing.B) {
	bc := startBenchCluster(b)
	service := func(i int) *cluster.Service {
		s := cluster.NewService(bc.nodes[i].h.Sessions(), nil)
		s.Bind(bc.nodes[i].c)
		return s
	}
	local, remote := service(0), service(1)
	ctx := stdctx.Background()
	turn := func(s *cluster.Service, i int) {
		t, err := s.Prompt(ctx, bc.ids[i%len(bc.ids)], sessions.PromptRequest{Content: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if r, err := t.Wait(ctx); err != nil || !r.Ran() {
			b.Fatalf("waiting for the turn: %+v, %v", r, err)
		}
	}
	n := max(100, min(b.N, benchFloorOps))
	start := time.Now()
	for i := range n {
		turn(local, i)
	}
	localWall := time.Since(start) / time.Duration(n)
	b.ReportAllocs()
	b.ResetTimer()
	start = time.Now()
	for i := range b.N {
		turn(remote, i)
	}
	wall := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(wall), "wall-ns/op")
	b.ReportMetric(float64(localWall), "local-ns/op")
}
