package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
)

// TestClusterServeHostsRunEachScheduleTimeOnce: three dsh serve processes
// of one cluster share an @every 1s schedule; each scheduled time is
// delivered by exactly one of them, and none is left out.
func TestClusterServeHostsRunEachScheduleTimeOnce(t *testing.T) {
	url := natstest.Single(t).ClientURL()
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: %q}
  lease_ttl: 2s
serve:
  no_auth: true
  schedules:
    - name: tick
      cron: "@every 1s"
      prompt: "tick {{.Time.Format \"15:04:05\"}}"
log: {level: info}
`, url)), 0o644)
	var hosts []*serveProcess
	for _, id := range []string{"a", "b", "c"} {
		hosts = append(hosts, startServe(t, path, "DSH_CLUSTER__HOST_ID="+id,
			"DSH_SERVE__STATE_DIR="+filepath.Join(t.TempDir(), id)))
	}
	delivered := regexp.MustCompile(`schedule run delivered.*request_id=(schedule:tick:\S+)`)
	runs := func() map[string][]int {
		out := map[string][]int{}
		for i, h := range hosts {
			for _, m := range delivered.FindAllStringSubmatch(h.log.String(), -1) {
				out[m[1]] = append(out[m[1]], i)
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(runs()) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 5 runs in 60s; logs:\n%s\n%s\n%s", hosts[0].log, hosts[1].log, hosts[2].log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := runs()
	var times []time.Time
	for id, by := range got {
		if len(by) != 1 {
			t.Errorf("run %s was delivered by hosts %v; want exactly one", id, by)
		}
		at, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, "schedule:tick:"))
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, at)
	}
	first, last := times[0], times[0]
	for _, at := range times {
		if at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	if n := int(last.Sub(first)/time.Second) + 1; n != len(times) {
		t.Errorf("%d runs between %s and %s; want one per second (%d): %v", len(times), first, last, n, got)
	}
}
