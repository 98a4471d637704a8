package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTwoProcessesOnOneSession starts a second `dsh run` on a session that
// a first one is writing: the second is refused with SESSION_LOCKED naming
// the holder and writes nothing; the first completes; the file stays valid
// and a later run resumes it.
func TestTwoProcessesOnOneSession(t *testing.T) {
	b := binaries(t)
	work := t.TempDir()
	o := &outcome{fault: "second dsh on a session in use"}
	defer record(o)
	slow := writeFile(t, work, "stream.yaml", fmt.Sprintf(streamYAML, longAnswer()))
	fast := writeFile(t, work, "echo.yaml", echoYAML)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * scale() {
		o.tries++
		first, second := fmt.Sprintf("first-%d", i), fmt.Sprintf("second-%d", i)
		holder := startDsh(t, b, work, slow, "", "-p", first)
		holder.waitFor(t, "the first streamed word", holder.stdout.first)

		other := startDsh(t, b, work, fast, "", "-p", second)
		code := other.wait(t)
		stderr := other.stderr.String()
		pid := strconv.Itoa(holder.cmd.Process.Pid)
		select {
		case <-holder.done:
			t.Fatalf("the holder ended before the second process was decided; the test needs a longer answer")
		default:
		}
		if code == 0 || !strings.Contains(stderr, "SESSION_LOCKED") || !strings.Contains(stderr, `"s1"`) || !strings.Contains(stderr, pid) || !strings.Contains(stderr, hostname) {
			t.Fatalf("the second process: exit %d, want a refusal with SESSION_LOCKED naming the session (s1) and the holder (pid %s on %s)\nstderr: %s", code, pid, hostname, stderr)
		}
		o.refuse("SESSION_LOCKED")

		if code := holder.wait(t); code != 0 {
			t.Fatalf("the holder: exit %d\nstderr: %s", code, holder.stderr)
		}
		freed := time.Now()
		after := startDsh(t, b, work, fast, "", "-p", fmt.Sprintf("after-%d", i))
		if code := after.wait(t); code != 0 {
			t.Fatalf("a run after the holder left: exit %d\nstderr: %s", code, after.stderr)
		}
		o.recover = append(o.recover, time.Since(freed))

		counts := promptCount(readSession(t, filepath.Join(work, "sessions"), "s1"))
		if counts[second] != 0 {
			o.doubled++
			t.Fatalf("the refused process wrote its prompt %q into the session", second)
		}
		if counts[first] != 1 {
			o.lost++
			t.Fatalf("the holder's prompt %q recorded %d times", first, counts[first])
		}
		o.kept++
	}
}
