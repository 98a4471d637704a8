//go:build linux

package jsonl

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAFailedAppendLeavesTheFileAsItWas makes an append fail half-way —
// the file-size limit lets a few of its bytes land — and checks that the
// file is cut back to its old content, so the retry that follows writes
// onto whole lines.
func TestAFailedAppendLeavesTheFileAsItWas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	whole := []byte(`{"seq":1}` + "\n")
	if err := os.WriteFile(path, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(len(whole) + 4) // room for 4 bytes of the next line
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	f, _, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sync := newCommitter(false)
	err = appendTo(f, []byte(`{"seq":2}`+"\n"), func(f *os.File) error { return sync.sync(f, false) })
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if err == nil {
		t.Fatal("the append went through despite the size limit")
	}
	got, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if string(got) != string(whole) {
		t.Fatalf("after a failed append the file holds %q; want %q", got, whole)
	}
	if err := appendTo(f, []byte(`{"seq":2}`+"\n"), func(f *os.File) error { return sync.sync(f, false) }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(whole)+`{"seq":2}`+"\n" {
		t.Fatalf("the retry left %q", got)
	}
}
