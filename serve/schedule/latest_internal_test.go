package schedule

import (
	"testing"
	"time"

	"github.com/dsh-go/dsh/host/config"
)

func TestLatestDue(t *testing.T) {
	base := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		cron       string
		first, now time.Time
		want       time.Time
		n          int
	}{
		{"0 * * * *", base, base.Add(-time.Minute), time.Time{}, 0},
		{"0 * * * *", base, base, base, 1},
		{"0 * * * *", base, base.Add(150 * time.Minute), base.Add(2 * time.Hour), 3},
		// Down for a month, every minute: counted up to the bound, the
		// latest found by looking back.
		{"* * * * *", base, base.Add(30*24*time.Hour + 30*time.Second), base.Add(30 * 24 * time.Hour), maxCounted},
		{"@every 7m", base, base.Add(30 * 24 * time.Hour), base.Add(30*24*time.Hour - 3*time.Minute), maxCounted},
	} {
		sched, err := config.CronParser.Parse(tc.cron)
		if err != nil {
			t.Fatal(err)
		}
		got, n := latestDue(sched, tc.first, tc.now)
		if !got.Equal(tc.want) || n != tc.n {
			t.Errorf("latestDue(%q, %v, %v) = %v, %d; want %v, %d", tc.cron, tc.first, tc.now, got, n, tc.want, tc.n)
		}
	}
}
