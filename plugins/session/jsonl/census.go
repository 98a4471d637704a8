package jsonl

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// tailReach bounds how far back a writer looks for the last census: past
// it, it leaves the census to the next listing rather than read a large
// catalog for one session.
const tailReach = 256 << 10

// withCensus makes change — a log a writer creates or removes, and the
// catalog lines it writes with put — holding the catalog's exclusive lock,
// and carries the census over it when the census was trusted just before
// (table.go). put writes through the locked catalog, so no other line or
// census can come between the check and the new census. Without a catalog
// the lines go through note, which creates it.
func (w *files) withCensus(change func(put func(line []byte, durable bool) error) error) error {
	path := filepath.Join(w.dir, catalogName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return change(func(line []byte, durable bool) error { return note(w.dir, line, durable) })
	}
	defer f.Close()
	for attempt := 0; ; attempt++ {
		if err := flockWait(f, syscall.LOCK_EX); err != nil {
			return err
		}
		if samePath(f, path) {
			break
		}
		// A compaction renamed a new catalog over this one.
		f.Close()
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0); err != nil || attempt > 100 {
			return change(func(line []byte, durable bool) error { return note(w.dir, line, durable) })
		}
	}
	now := time.Now().UnixNano()
	prev, seg, crcs, found := lastCensus(f)
	mtime, ino, err := statDir(w.dir)
	trusted := found && err == nil && prev.trusted(mtime, ino, now)
	put := func(line []byte, durable bool) error {
		if _, err := f.Write(append([]byte{'\n'}, line...)); err != nil {
			return err
		}
		if _, ok := checkLine(bytes.TrimSuffix(line, []byte{'\n'})); ok {
			seg++
			crcs += uint64(crc(line))
		}
		if durable {
			return f.Sync()
		}
		return nil
	}
	if err := change(put); err != nil || !trusted {
		return err
	}
	after, ino2, err := statDir(w.dir)
	if err != nil || ino2 != ino {
		return nil
	}
	c := census{mtime: after, ino: ino, deadline: after + int64(w.margin()), lines: seg, crcs: crcs}
	if prev.deadline != 0 {
		c.deadline = min(c.deadline, prev.deadline)
	}
	f.Write(append([]byte{'\n'}, encodeCensus(c)...))
	return nil
}

func crc(line []byte) uint32 {
	c, _ := checkLine(bytes.TrimSuffix(line, []byte{'\n'}))
	return c
}

// lastCensus reads the catalog f backwards to its last census line, within
// tailReach: the census, and the number and CRC sum of the intact lines
// after it. found is false without one, or with a torn or garbled line
// after it, when no census can follow.
func lastCensus(f *os.File) (c census, seg int64, crcs uint64, found bool) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return c, 0, 0, false
	}
	n := min(fi.Size(), tailReach)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, fi.Size()-n); err != nil && !errors.Is(err, io.EOF) {
		return c, 0, 0, false
	}
	if buf[len(buf)-1] != '\n' {
		return c, 0, 0, false // torn
	}
	agents := map[string]string{}
	for end := len(buf) - 1; end > 0; {
		start := bytes.LastIndexByte(buf[:end], '\n')
		if start < 0 && n < fi.Size() {
			return c, 0, 0, false // out of reach
		}
		line := buf[start+1 : end]
		end = max(start, 0)
		if len(line) == 0 {
			continue
		}
		sum, ok := checkLine(line)
		if !ok {
			return c, 0, 0, false
		}
		if line[9] == kindCensus {
			e, ok := parseFields(line, agents)
			if c, ok2 := decodeCensus(e); ok && ok2 {
				return c, seg, crcs, true
			}
			return c, 0, 0, false
		}
		seg++
		crcs += uint64(sum)
	}
	return c, 0, 0, false
}
