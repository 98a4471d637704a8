package execplugin

import (
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestOutputLogSplitsLines: one entry per line, whatever the writes'
// boundaries; the handshake line skipped when asked; a line without end
// logged in bounded pieces rather than held.
func TestOutputLogSplitsLines(t *testing.T) {
	var b strings.Builder
	o := newOutputLog(hclog.New(&hclog.LoggerOptions{Output: &b, Level: hclog.Info}), "stdout")
	o.skipFirst = true
	for _, w := range []string{"1|2|unix|/tmp/x|grpc|CERT\nfir", "st\r\nsecond\n", strings.Repeat("x", maxOutputLine+10)} {
		o.Write([]byte(w))
	}
	got := b.String()
	if strings.Contains(got, "grpc|CERT") {
		t.Fatalf("the handshake line was logged:\n%s", got)
	}
	if !strings.Contains(got, `line=first`) || !strings.Contains(got, "line=second") || strings.Count(got, "plugin output") != 3 {
		t.Fatalf("want first, second and one %d-byte piece:\n%s", maxOutputLine, got)
	}
	if len(o.pending) != 10 {
		t.Fatalf("%d bytes held, want the 10 after the piece", len(o.pending))
	}
	// The end of the stream logs what is left.
	tee := teeOutput{r: io.NopCloser(strings.NewReader("")), w: o}
	if _, err := tee.Read(make([]byte, 8)); err != io.EOF {
		t.Fatal(err)
	}
	if got := b.String(); strings.Count(got, "plugin output") != 4 || !strings.Contains(got, "line="+strings.Repeat("x", 10)+"\n") {
		t.Fatalf("the unterminated tail was not logged at the end:\n%s", got)
	}
}
