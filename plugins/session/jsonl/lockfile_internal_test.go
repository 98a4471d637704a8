package jsonl

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd on this kernel")
	}
	return len(fds)
}

// TestAnOpenSessionHoldsOneDescriptor: the log is the lock, so ten
// sessions held and written hold ten descriptors, and the directory holds
// their logs and the catalog, nothing else.
func TestAnOpenSessionHoldsOneDescriptor(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	before := openFds(t)
	var held []*writer
	for i := range 10 {
		wr, err := w.lock(fmt.Sprintf("s%d", i), true)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, wr)
		for j, e := range turn(1, "p", true) {
			e.Seq = int64(j + 1)
			wr.add("main", "", e)
		}
		if err := wr.write(1 << 62); err != nil {
			t.Fatal(err)
		}
	}
	if n := openFds(t) - before; n != 10 {
		t.Fatalf("10 open sessions hold %d descriptors", n)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 11 || names[0] != filepath.Join(dir, catalogName) {
		t.Fatalf("the directory holds %v", names)
	}
	for _, wr := range held {
		wr.Release()
	}
	if n := openFds(t) - before; n != 0 {
		t.Fatalf("released sessions hold %d descriptors", n)
	}
}

// TestASessionNeverWrittenLeavesNoLog: Lock creates the log it locks;
// released empty, the log goes again, and a resume of an id never stored
// (LockStored) is NotFound and creates nothing.
func TestASessionNeverWrittenLeavesNoLog(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	ctx := stdctx.Background()
	l, err := w.Lock(ctx, "never")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.jsonl")); err != nil {
		t.Fatalf("a held session has no log to lock: %v", err)
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, "never.jsonl")); err == nil {
		t.Fatal("a session never written left its empty log")
	}
	if _, err := w.LockStored(ctx, "missing"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("LockStored of an id never stored: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Fatal("LockStored created a log")
	}
	// A stored empty log is a session: kept.
	os.WriteFile(filepath.Join(dir, "empty.jsonl"), nil, 0o600)
	l, err = w.LockStored(ctx, "empty")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, "empty.jsonl")); err != nil {
		t.Fatal("releasing a stored empty log removed it")
	}
	if list, err := w.List(ctx); err != nil || len(list) != 1 || list[0].ID != "empty" {
		t.Fatalf("listed %+v (%v)", list, err)
	}
}

// TestALegacyLockFile: the <id>.lock of a dsh before this version, held,
// refuses the session naming its holder; free, it is removed.
func TestALegacyLockFile(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	writeLog(t, w, "s", "main", turn(1, "p", true))
	path := filepath.Join(dir, "s.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"pid":4242,"host":"old"}` + "\n")
	_, err = w.lock("s", true)
	if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) || !strings.Contains(err.Error(), `process 4242 on host "old"`) {
		t.Fatalf("a session an older dsh holds: %v", err)
	}
	if err := w.Delete(stdctx.Background(), "s"); !errs.HasCode(err, session.SessionLocked) {
		t.Fatalf("deleting a session an older dsh holds: %v", err)
	}
	f.Close()
	wr, err := w.lock("s", true)
	if err != nil {
		t.Fatal(err)
	}
	wr.Release()
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a free legacy lock file was left behind")
	}
}

// TestLastLineOfReadsBackwardsAcrossSteps: the holder lookup reads the
// catalog backwards in 64 KiB steps; for every session of a catalog of
// several steps it finds the same last line as reading the whole file,
// lines cut by a step's edge included.
func TestLastLineOfReadsBackwardsAcrossSteps(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	var buf []byte
	for i := range 6000 {
		id := fmt.Sprintf("s%04d", i%1000)
		if i < 1000 && i%7 == 0 {
			ids = append(ids, id)
		}
		kind := byte(kindClosed)
		if i%3 == 1 {
			kind = kindOpen
		}
		buf = append(append(buf, '\n'), encodeEntry(kind, session.Summary{ID: id, Agent: "main", Title: holder{PID: i, Host: "h"}.encode()})...)
	}
	path := filepath.Join(dir, catalogName)
	os.WriteFile(path, buf, 0o600)
	if fi, _ := os.Stat(path); fi.Size() < 3*64<<10 {
		t.Fatalf("the catalog is only %d bytes", fi.Size())
	}
	whole, err := readCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		want, _ := whole.at(id)
		got, ok := lastLineOf(path, id)
		if !ok || string(got.raw) != string(want.raw) {
			t.Fatalf("%s: got %q, want %q", id, got.raw, want.raw)
		}
	}
	if _, ok := lastLineOf(path, "missing"); ok {
		t.Fatal("found a line of a session the catalog does not name")
	}
}

// TestAnEmptyLogFoundHasItsNameSynced: a log left empty — by a holder
// that created it and died before its first write, so before anything
// synced the directory's entry for it — is found, not created, by the
// next holder. Its first write must still sync that entry (fresh), or a
// power cut takes the file, with events its caller was told are durable.
func TestAnEmptyLogFoundHasItsNameSynced(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	if err := os.WriteFile(filepath.Join(dir, "left.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, create := range []bool{true, false} {
		wr, err := w.lock("left", create)
		if err != nil {
			t.Fatal(err)
		}
		if wr.created {
			t.Fatal("a log found was taken as created")
		}
		if !wr.fresh {
			t.Errorf("lock(create=%v) of a log found empty: its first write would not sync the directory", create)
		}
		// Not created here: released empty, it stays.
		if err := wr.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
