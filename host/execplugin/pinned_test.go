package execplugin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// A binary renamed over a pinned plugin's path between the check and the
// start must never run: dsh runs the file it hashed. Before, it hashed the
// path and then executed the path again, and a swap in between ran the
// unpinned file within a few starts.
func TestPinnedBinarySwapNeverRunsTheOther(t *testing.T) {
	good, _ := binaries(t)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	dir := t.TempDir()
	marker := filepath.Join(dir, "unpinned-ran")
	evil := filepath.Join(dir, "evil")
	script := fmt.Sprintf("#!/bin/sh\necho ran >> %s\nexit 1\n", marker)
	if err := os.WriteFile(evil, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pinned := filepath.Join(dir, "plugin")
	place := func(src, tmp string) {
		os.Remove(tmp)
		if err := os.Link(src, tmp); err != nil {
			t.Error(err)
			return
		}
		if err := os.Rename(tmp, pinned); err != nil {
			t.Error(err)
		}
	}
	place(good, filepath.Join(dir, "tmp-good"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			place(evil, filepath.Join(dir, "tmp-evil"))
			place(good, filepath.Join(dir, "tmp-good"))
		}
	})
	yaml := execConfig(pinned, "{}", "    sha256: \""+hex.EncodeToString(sum[:])+"\"\n")
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
	close(stop)
	wg.Wait()
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the unpinned binary ran %d times in 30 starts", len(b)/len("ran\n"))
	}
	t.Logf("%d starts ran the pinned binary, %d were refused (the checksum read the other file)", started, refused)
	if started == 0 {
		t.Fatal("no start succeeded: the test proves nothing")
	}
}
