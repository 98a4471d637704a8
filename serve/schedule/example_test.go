package schedule_test

import (
	"fmt"
	"time"

	"github.com/dsh-go/dsh/serve/schedule"
)

// The request id of a run names its schedule and scheduled time, so the
// same run is never taken twice by a session that keeps its log.
func ExampleRequestID() {
	berlin := time.FixedZone("CET", 3600)
	fmt.Println(schedule.RequestID("nightly", time.Date(2026, 3, 2, 3, 0, 0, 0, berlin)))
	// Output: schedule:nightly:2026-03-02T02:00:00Z
}
