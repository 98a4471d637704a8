package otlptest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The collector binary is built once per machine and source: test
// binaries of several packages run in parallel and each would otherwise
// spend minutes of CPU building the same thing.
var built struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the test collector, building it first if no
// build of the current source is cached.
func Binary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() { built.path, built.err = build() })
	if built.err != nil {
		t.Fatalf("building the test collector: %v", built.err)
	}
	return built.path
}

// source is the nested module's directory, found from this file's path:
// tests run from a checkout, where the source is at hand.
func source() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no caller information to find the collector's source")
	}
	dir := filepath.Join(filepath.Dir(file), "otelcol")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("the collector's source is not at %s: %w", dir, err)
	}
	return dir, nil
}

// key hashes what decides the binary: the module's go.mod, go.sum and Go
// files, and the Go toolchain that builds it. Anything else in the
// directory (a binary someone built there) is left out.
func key(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries { // sorted by name
		name := e.Name()
		if e.IsDir() || (name != "go.mod" && name != "go.sum" && !strings.HasSuffix(name, ".go")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func build() (string, error) {
	dir, err := source()
	if err != nil {
		return "", err
	}
	k, err := key(dir)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "dsh-otelcol", k)
	bin := filepath.Join(out, "otelcol")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	// Another test process may be building the same binary: wait for it
	// rather than build twice on a busy machine.
	lock, err := os.OpenFile(filepath.Join(out, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build the collector with: %w", err)
	}
	tmp := bin + ".tmp"
	cmd := exec.Command(goTool, "build", "-ldflags=-s -w", "-o", tmp, ".")
	cmd.Dir = dir
	// The nested module builds on its own: no workspace, no flags meant
	// for dsh's module.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	return bin, os.Rename(tmp, bin)
}
