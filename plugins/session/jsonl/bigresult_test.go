package jsonl_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// bigConfig is the config of the tool "big", which returns Size bytes of
// JSON-escaped text: quotes and newlines, as a command's output has.
type bigConfig struct {
	Size int `koanf:"size"`
}

func init() {
	plugin.Register("test.big", "a tool with a large result (tests only)", func(ctx *dshctx.Context, cfg bigConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		out := bigText(cfg.Size)
		return svc.Register(ctx, tools.Tool{
			Name: "big", Description: "returns a large result", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: out}, nil },
		})
	}, tools.Key)

	if dir := os.Getenv(resumeEnv); dir != "" {
		// The helper process of BenchmarkResumeLargeResult: resume, say
		// how long it took and how long the history is, exit.
		t0 := time.Now()
		h, err := hosttest.Start(mustParse(bigYAML(dir, 0)), host.Options{Logger: hclog.NewNullLogger()})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		took := time.Since(t0)
		a, _ := h.Agent("main")
		fmt.Println(took.Nanoseconds(), a.Session().History().Len(), peakRSS())
		os.Exit(0)
	}
}

const resumeEnv = "DSH_JSONL_TEST_RESUME"

// peakRSS is the process's peak resident set in KiB (VmHWM).
func peakRSS() int64 {
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func bigText(n int) string {
	line := `{"path": "src/a.go", "line": 12, "text": "x := \"y\""}` + "\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

func bigYAML(dir string, size int) string {
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: big, arguments: '{}'}]
        - text: "read it"
  - use: test.big
    config: {size: %d}
  - use: session.jsonl
    config: {dir: %q}
agents:
  - id: main
    provider: scripted
    session: s1
log: {level: warn}
`, size, dir)
}

func mustParse(yaml string) *config.Config {
	cfg, err := config.Parse("big.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		panic(err)
	}
	return cfg
}

// writeBigSession runs one turn whose tool returns size bytes and closes
// the host.
func writeBigSession(tb testing.TB, dir string, size int) {
	tb.Helper()
	h, err := hosttest.Start(mustParse(bigYAML(dir, size)), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "dump"}); err != nil {
		tb.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
	if err := h.Close(stdctx.Background()); err != nil {
		tb.Fatal(err)
	}
}

// TestALargeToolResultIsKeptBesideTheLog: a 1 MB tool result is stored
// once in the attachments beside the session file, which stays small; a
// restart (which collects unreferenced blobs) keeps it, the resumed
// history references it, and the next turn sends it to the model.
func TestALargeToolResultIsKeptBesideTheLog(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	writeBigSession(t, dir, size)
	st, err := os.Stat(filepath.Join(dir, "s1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 16<<10 {
		t.Fatalf("the session file is %d bytes with a %d-byte tool result in it; want the result out of line", st.Size(), size)
	}
	ref := attachments.RefOf([]byte(bigText(size)))
	blob := filepath.Join(dir, "attachments", "blobs", strings.TrimPrefix(ref, attachments.RefPrefix))

	h, err := hosttest.Start(mustParse(bigYAML(dir, size)), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	if got, err := os.ReadFile(blob); err != nil || !bytes.Equal(got, []byte(bigText(size))) {
		t.Fatalf("after a restart the stored result %s holds %d bytes (%v)", blob, len(got), err)
	}
	a, _ := h.Agent("main")
	var result *llm.Message
	for _, e := range a.Session().Events(1) {
		if e.Type == session.ToolResult {
			result = e.Message
		}
	}
	if result == nil || len(result.Parts) != 1 || result.Parts[0].Ref != ref {
		t.Fatalf("the resumed tool result is %+v; want it by reference", result)
	}
	// The scripted model refuses a request whose parts lack their bytes;
	// the stored result goes to it as whole text.
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "again"}); err != nil {
		t.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
	evs := a.Session().Events(1)
	if last := evs[len(evs)-1]; last.Type != session.TurnEnd || last.Reason != "completed" {
		t.Fatalf("the turn after the resume ended with %+v", last)
	}
}

// BenchmarkResumeLargeResult resumes a session holding one 50 MB tool
// result in a fresh process and reports the time to resume (the host's
// start) and the process's peak RSS.
//
//	go test -run '^$' -bench ResumeLargeResult -benchtime 5x ./plugins/session/jsonl/
func BenchmarkResumeLargeResult(b *testing.B) {
	dir := b.TempDir()
	writeBigSession(b, dir, 50<<20)
	st, _ := os.Stat(filepath.Join(dir, "s1.jsonl"))
	var took time.Duration
	var rss int64
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), resumeEnv+"="+dir)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		f := strings.Fields(string(out))
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		took += time.Duration(ns)
		// The helper reads its own peak: the rusage of a child counts the
		// memory of the parent it was started from.
		kb, _ := strconv.ParseInt(f[2], 10, 64)
		rss = max(rss, kb)
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "resume-ms")
	b.ReportMetric(float64(rss)/1024, "peak-rss-MB")
	b.ReportMetric(float64(st.Size())/(1<<20), "log-MB")
	b.ReportMetric(0, "ns/op")
}

// TestALostLargeResultDoesNotWedgeTheSession: the stored result removed
// behind dsh's back, the next turn still runs — the model gets the
// preview with a note — instead of failing every turn after.
func TestALostLargeResultDoesNotWedgeTheSession(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	writeBigSession(t, dir, size)
	ref := attachments.RefOf([]byte(bigText(size)))
	if err := os.Remove(filepath.Join(dir, "attachments", "blobs", strings.TrimPrefix(ref, attachments.RefPrefix))); err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(mustParse(bigYAML(dir, size)), host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "again"}); err != nil {
		t.Fatal(err)
	}
	a.WhenIdle(stdctx.Background())
	evs := a.Session().Events(1)
	if last := evs[len(evs)-1]; last.Type != session.TurnEnd || last.Reason != "completed" {
		t.Fatalf("the turn after the result was lost ended with %+v", last)
	}
}
