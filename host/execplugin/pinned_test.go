package execplugin_test

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// swapper holds a pinned plugin path and, once started, renames another
// binary over it and the pinned one back, as fast as it can. The other
// binary is a script that leaves a mark when it runs.
type swapper struct {
	t                     *testing.T
	dir, path, good, evil string
	marker                string
	stop                  chan struct{}
	wg                    sync.WaitGroup
	sum                   string
}

func newSwapper(t *testing.T) *swapper {
	good, _ := binaries(t)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	dir := t.TempDir()
	s := &swapper{t: t, dir: dir, path: filepath.Join(dir, "plugin"), good: good, evil: filepath.Join(dir, "evil"),
		marker: filepath.Join(dir, "unpinned-ran"), stop: make(chan struct{}), sum: hex.EncodeToString(sum[:])}
	script := fmt.Sprintf("#!/bin/sh\necho ran >> %s\nexit 1\n", s.marker)
	if err := os.WriteFile(s.evil, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s.place(good, "tmp-good")
	return s
}

// place renames a fresh link of src over the pinned path.
func (s *swapper) place(src, tmp string) {
	tmp = filepath.Join(s.dir, tmp)
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		s.t.Error(err)
		return
	}
	if err := os.Rename(tmp, s.path); err != nil {
		s.t.Error(err)
	}
}

func (s *swapper) start() {
	s.wg.Go(func() {
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			s.place(s.evil, "tmp-evil")
			s.place(s.good, "tmp-good")
		}
	})
}

// finish stops swapping and fails the test if the other binary ever ran.
func (s *swapper) finish() {
	close(s.stop)
	s.wg.Wait()
	if b, err := os.ReadFile(s.marker); err == nil {
		s.t.Fatalf("the unpinned binary ran %d times", len(b)/len("ran\n"))
	}
}

func (s *swapper) config(pluginConfig, extra string) string {
	return execConfig(s.path, pluginConfig, "    sha256: \""+s.sum+"\"\n"+extra)
}

// A binary renamed over a pinned plugin's path between the check and the
// start must never run: dsh runs the file it hashed. Before, it hashed the
// path and then executed the path again, and a swap in between ran the
// unpinned file within a few starts.
func TestPinnedBinarySwapNeverRunsTheOther(t *testing.T) {
	s := newSwapper(t)
	s.start()
	yaml := s.config("{}", "")
	started, refused := 0, 0
	for range 30 {
		cfg, err := config.Parse("exec.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
		if err != nil {
			refused++
			continue
		}
		started++
		if err := h.Close(t.Context()); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Log(err)
		}
	}
	s.finish()
	t.Logf("%d starts ran the pinned binary, %d were refused (the checksum read the other file)", started, refused)
	if started == 0 {
		t.Fatal("no start succeeded: the test proves nothing")
	}
}

// The same holds for the restarts after a crash: each one hashes and runs
// one open file.
func TestPinnedBinarySwapNeverRunsTheOtherOnRestart(t *testing.T) {
	s := newSwapper(t)
	// A crash counts alone (restart_window 1ms), so every restart waits
	// the shortest backoff.
	h, logs := startExec(t, s.config("{crash_word: boom}", "    max_restarts: 1000\n    restart_window: 1ms\n"))
	s.start()
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		send(h, stdctx.Background(), "main", "boom") // crashes it when it is up
		time.Sleep(20 * time.Millisecond)
	}
	s.finish()
	restarts := strings.Count(logs.String(), "plugin started") - 1
	refused := strings.Count(logs.String(), "does not match the sha256")
	t.Logf("%d restarts ran the pinned binary, %d were refused", restarts, refused)
	if restarts < 3 {
		t.Fatalf("only %d restarts: the test proves little\n%s", restarts, logs.String())
	}
}
