package bash

import (
	"strings"
	"testing"
)

// TestTheRingKeepsTheLatestBytesAndCountsTheRest writes across the
// ring's end many times and reads from offsets before, inside and at the
// end of what it holds.
func TestTheRingKeepsTheLatestBytesAndCountsTheRest(t *testing.T) {
	r := newRing(10)
	var all strings.Builder
	for i := range 7 {
		chunk := strings.Repeat(string(rune('a'+i)), i+1) // 1+2+...+7 = 28 bytes
		r.Write([]byte(chunk))
		all.WriteString(chunk)
	}
	want := all.String()
	if r.total != 28 || r.n != 10 {
		t.Fatalf("total %d, held %d", r.total, r.n)
	}
	data, next, dropped := r.read(0, 100, true)
	if string(data) != want[18:] || next != 28 || dropped != 18 {
		t.Fatalf("from 0: %q next %d dropped %d", data, next, dropped)
	}
	data, next, dropped = r.read(20, 3, true)
	if string(data) != want[20:23] || next != 23 || dropped != 0 {
		t.Fatalf("from 20: %q next %d dropped %d", data, next, dropped)
	}
	if data, next, _ := r.read(28, 5, false); len(data) != 0 || next != 28 {
		t.Fatalf("at the end: %q %d", data, next)
	}
	r.Write([]byte(strings.Repeat("z", 25))) // longer than the ring
	if data, _, dropped := r.read(28, 100, true); string(data) != strings.Repeat("z", 10) || dropped != 15 {
		t.Fatalf("after a long write: %q dropped %d", data, dropped)
	}
}

// TestTheRingNeverSplitsACharacter: a read bounded inside a character
// stops before it, and a lost start skips its continuation bytes.
func TestTheRingNeverSplitsACharacter(t *testing.T) {
	r := newRing(8)
	r.Write([]byte("aé€")) // 1 + 2 + 3 bytes
	data, next, _ := r.read(0, 4, false)
	if string(data) != "aé" || next != 3 {
		t.Fatalf("%q %d", data, next)
	}
	r.Write([]byte("€€")) // 12 bytes in all, 8 kept: the first € cut
	data, _, dropped := r.read(0, 100, true)
	if string(data) != "€€" || dropped != 6 {
		t.Fatalf("%q dropped %d", data, dropped)
	}
	r2 := newRing(8)
	r2.Write([]byte("ab\xe2\x82")) // a € still being written
	if data, next, _ := r2.read(0, 8, false); string(data) != "ab" || next != 2 {
		t.Fatalf("a partial last character waits: %q %d", data, next)
	}
}

// TestTheRingGrowsOnlyAsTheOutputDoes: a quiet job holds little, a loud
// one never more than size.
func TestTheRingGrowsOnlyAsTheOutputDoes(t *testing.T) {
	r := newRing(1 << 20)
	r.Write([]byte("hello\n"))
	if cap(r.buf) > 4096 {
		t.Fatalf("six bytes hold a buffer of %d", cap(r.buf))
	}
	chunk := make([]byte, 3000)
	for range 1000 {
		r.Write(chunk)
	}
	if cap(r.buf) != 1<<20 || r.n != 1<<20 {
		t.Fatalf("3 MB of output hold %d bytes (cap %d); want exactly the size", r.n, cap(r.buf))
	}
}
