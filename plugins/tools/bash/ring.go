package bash

import "unicode/utf8"

// ring keeps the last size bytes a background job wrote and counts all of
// them, so a reader that fell behind learns how much it missed. Offsets
// are absolute: byte n of everything the job ever wrote. Its buffer grows
// with the output up to size: a quiet job does not hold size bytes.
type ring struct {
	size  int
	buf   []byte
	start int   // index in buf of the oldest byte held
	n     int   // bytes held
	total int64 // bytes written in all
}

func newRing(size int) *ring { return &ring{size: size} }

func (r *ring) Write(p []byte) (int, error) {
	written := len(p)
	r.total += int64(written)
	if len(r.buf) < r.size {
		// Filling: nothing wrapped yet, the oldest byte is the first.
		take := min(len(p), r.size-len(r.buf))
		if need := len(r.buf) + take; need > cap(r.buf) {
			// Doubling, but never past size: append's own growth would.
			grown := make([]byte, len(r.buf), min(r.size, max(2*cap(r.buf), need, 4096)))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, p[:take]...)
		r.n, p = len(r.buf), p[take:]
		if len(p) == 0 {
			return written, nil
		}
	}
	size := r.size
	if len(p) >= size {
		copy(r.buf, p[len(p)-size:])
		r.start = 0
		return written, nil
	}
	// Full: the new bytes overwrite the oldest, from start on.
	c := copy(r.buf[r.start:], p)
	copy(r.buf, p[c:])
	r.start = (r.start + len(p)) % size
	return written, nil
}

// oldest is the offset of the oldest byte held.
func (r *ring) oldest() int64 { return r.total - int64(r.n) }

// read returns at most max bytes from offset off on, the offset after
// them, and how many bytes before them were lost (written and dropped
// before this read). A cut never splits a character: continuation bytes
// at a lost start are skipped, and a partial character at the end waits
// for the next read unless final says nothing more will be written.
func (r *ring) read(off int64, max int, final bool) (data []byte, next int64, dropped int64) {
	if old := r.oldest(); off < old {
		dropped, off = old-off, old
	}
	take := int(min(r.total-off, int64(max)))
	data = make([]byte, take)
	if take > 0 {
		size := len(r.buf)
		pos := (r.start + int(off-r.oldest())) % size
		c := copy(data, r.buf[pos:min(pos+take, size)])
		copy(data[c:], r.buf[:take-c])
	}
	if dropped > 0 {
		skip := 0
		for skip < len(data) && skip < utf8.UTFMax && !utf8.RuneStart(data[skip]) {
			skip++
		}
		data, off, dropped = data[skip:], off+int64(skip), dropped+int64(skip)
	}
	if !final || off+int64(len(data)) < r.total {
		data = data[:completeRunes(data)]
	}
	return data, off + int64(len(data)), dropped
}
