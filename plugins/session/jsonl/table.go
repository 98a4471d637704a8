package jsonl

import (
	"bytes"
	"hash/crc32"
	"hash/maphash"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// A listing of 100,000 sessions must not cost a directory read of 100,000
// names, nor an entry and a map slot per catalog line. So the catalog
// also holds a census: the directory's mtime (and inode) a listing saw
// when it had just checked that the catalog names exactly the logs the
// directory holds. While the directory still has that mtime, no name was
// added or removed since, and the catalog says which sessions exist: the
// listing reads neither the directory nor any log it has a closed line
// for. Any change of a name — a log copied in or removed by hand, a
// session created or deleted by a writer, the catalog replaced or
// removed — changes the mtime, and the next listing reads the directory
// again and writes a new census.
//
// A timestamp is coarse: a name changed in the same tick as the mtime a
// census recorded would leave it as it was. The rule is git's "racily
// clean": a census is recorded with a deadline when the listing that made
// it saw an mtime less than censusMargin old (its tick may not have
// ended), and trusted only until that deadline, mtime + censusMargin;
// recorded later, it has none. censusMargin is far above any local file
// system's timestamp granularity (ns to 10 ms) and the lag of the coarse
// clock the kernel stamps with. So a change of names shows up in the next
// listing, except one made in the very tick of a change a listing had
// just reconciled, which shows up at most censusMargin later.
//
// A census also covers the catalog's lines before it, back to the census
// before it: their number and the sum of their CRCs. A line removed or
// changed in place by hand (which leaves the directory's mtime alone)
// breaks that chain and the census counts for nothing, as does any torn or
// garbled line anywhere: the listing then reads the directory, and
// compacts the catalog.
//
// dsh's own writers change names too: Lock creates a log, Delete and the
// release of a log never written remove one. They hold the catalog's
// exclusive lock around the change and the line that says it (withCensus),
// and when the census was trusted just before, append one for the
// directory after it. A name changed by hand in that window would hide
// behind the writer's change, so that census gets the deadline of a racy
// one (mtime + censusMargin), or keeps the earlier deadline of the one it
// follows: chains of writers never push a possible hidden change past the
// margin. A compaction, which reads the names itself, appends a census
// with that deadline after its rename when its catalog names every log.
const censusMargin = 2 * time.Second

// kindCensus is the kind of a census line; its id column is ".", no
// session's id, so a dsh before the census takes it for a session it
// never finds in the directory.
const kindCensus = 's'

// census is what a census line records.
type census struct {
	mtime    int64  // the directory's, unix ns
	ino      uint64 // the directory's
	deadline int64  // unix ns; 0 for none
	lines    int64  // intact lines between the census before it and it
	crcs     uint64 // the sum of their CRCs
}

// encodeCensus is the catalog line of c, in the columns of a session's
// line: kind, mtime, id ".", inode, deadline, lines, crcs.
func encodeCensus(c census) []byte {
	var b []byte
	b = append(b, "00000000\t"...)
	b = append(b, kindCensus, '\t')
	b = strconv.AppendInt(b, c.mtime, 10)
	b = append(b, "\t.\t"...)
	b = strconv.AppendUint(b, c.ino, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, c.deadline, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, c.lines, 10)
	b = append(b, '\t')
	b = strconv.AppendUint(b, c.crcs, 10)
	b = append(b, "\t0\t"...)
	crc := crc32.ChecksumIEEE(b[9:])
	hex := strconv.AppendUint(nil, uint64(crc)|1<<32, 16)
	copy(b, hex[1:])
	return append(b, '\n')
}

func decodeCensus(e entry) (census, bool) {
	c := census{mtime: e.updated}
	var ok1, ok2 bool
	c.ino, ok1 = parseUint(e.agent)
	f := bytes.SplitN(e.rest, []byte{'\t'}, 4)
	if len(f) != 4 || !ok1 {
		return c, false
	}
	var ok3, ok4 bool
	c.deadline, ok2 = parseInt(f[0])
	c.lines, ok3 = parseInt(f[1])
	c.crcs, ok4 = parseUint(string(f[2]))
	return c, ok2 && ok3 && ok4
}

func parseUint(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// trusted says whether the census still says which sessions exist, for a
// directory of mtime and ino, at now.
func (c census) trusted(mtime int64, ino uint64, now int64) bool {
	return c.mtime == mtime && c.ino == ino && (c.deadline == 0 || now < c.deadline)
}

// catalogTable is the catalog as one listing reads it: the file's bytes,
// mapped where the platform can, and the offset of the last intact line
// of each session in an open-addressed table — no entry, string or map
// slot per line.
type catalogTable struct {
	data    []byte
	release func()
	found   bool
	ino     uint64
	size    int64 // bytes up to the last whole line

	// slots: the top 32 bits of the id's hash, and the line's offset + 1;
	// 0 is empty.
	slots []uint64
	used  int
	seed  maphash.Seed

	lines   int64  // intact lines
	seg     int64  // intact lines since the last census line
	crcs    uint64 // the sum of their CRCs
	garbled int    // whole lines that are torn or garbled
	census  census
	counted bool // census is the last census line, and it and every one before it covers its lines
	broken  bool // a census line does not cover its lines: only a compaction can mend the chain
	agents  map[string]string
	sink    byte // what prefetch read, kept so that its loads stay
}

func (t *catalogTable) close() {
	if t.release != nil {
		t.release()
		t.release = nil
	}
	t.data = nil
	if t.slots != nil {
		putSlots(t.slots)
		t.slots = nil
	}
}

// slotPool keeps the tables of listings past: a table of 100,000
// sessions is 2 MB, and a fresh one per listing costs a collection
// every other listing, which stops the listing's own loops.
var slotPool sync.Pool

func getSlots(n int) []uint64 {
	if p, ok := slotPool.Get().(*[]uint64); ok && cap(*p) >= n {
		s := (*p)[:n]
		clear(s)
		return s
	}
	return make([]uint64, n)
}

func putSlots(s []uint64) {
	slotPool.Put(&s)
}

// scan fills the table from data.
func (t *catalogTable) scan() {
	t.seed = maphash.MakeSeed()
	t.agents = map[string]string{}
	t.slots = getSlots(tableSize(len(t.data)/96 + 16)) // lines are ~100 bytes
	var crcs uint64
	chain := true
	data := t.data
	// Lines go into the table in batches, their slots loaded together
	// first, as a listing's lookups are (prefetch).
	const batch = 64
	var (
		hs    [batch]uint64
		at    [batch]int
		slots [batch]uint64
		n     int
	)
	flush := func() {
		t.prefetch(hs[:n], slots[:])
		for j := range n {
			l := bytes.IndexByte(data[at[j]:], '\t')
			t.putHashed(hs[j], data[at[j]:at[j]+l], at[j])
		}
		n = 0
	}
	defer flush()
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			break // a line being appended, or torn
		}
		line := data[off : off+end]
		t.size = int64(off + end + 1)
		start := off
		off += end + 1
		if len(line) == 0 {
			continue // the newline an append leads with
		}
		crc, ok := checkLine(line)
		if !ok {
			t.garbled++
			continue
		}
		if line[9] == kindCensus {
			e, ok := parseFields(line, t.agents)
			c, cok := decodeCensus(e)
			chain = chain && ok && cok && c.lines == t.seg && c.crcs == crcs
			t.counted, t.census, t.broken = chain, c, !chain
			t.lines++
			t.seg, crcs = 0, 0
			continue
		} else if i, l := lineIDAt(line); l > 0 {
			hs[n], at[n] = t.hash(line[i:i+l]), start+i
			if n++; n == batch {
				flush()
			}
		}
		t.lines++
		t.seg++
		crcs += uint64(crc)
	}
	t.crcs = crcs
}

// tableSize is a power of two at least 1.5 n.
func tableSize(n int) int {
	size := 64
	for size < n+n/2 {
		size *= 2
	}
	return size
}

// A slot holds, from the top: 24 bits of the id's hash (a tag that
// settles most mismatches without touching the catalog), the id's length
// (idLenUnknown when it does not fit), and the offset of the id in the
// catalog + 1; 0 is empty. Pointing at the id rather than the line start
// lets a lookup compare names in one cache line without scanning for a
// column: checking 100,000 directory names is random access into a 10 MB
// file, and each byte scanned on the way costs.
const (
	idLenUnknown = 255
	offMask      = 1<<32 - 1
)

func slotOf(h uint64, idLen, idOff int) uint64 {
	l := uint64(min(idLen, idLenUnknown))
	return h>>40<<40 | l<<32 | uint64(idOff+1)
}

// sameTag says whether slot s may hold the id of hash h and length n.
func sameTag(s, h uint64, n int) bool {
	return s>>40 == h>>40 && (s>>32&0xff == uint64(min(n, idLenUnknown)))
}

// putHashed records the line whose id is at idOff as the last of id,
// whose hash is h.
func (t *catalogTable) putHashed(h uint64, id []byte, idOff int) {
	if 4*(t.used+1) > 3*len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = slotOf(h, len(id), idOff)
			t.used++
			return
		}
		if sameTag(s, h, len(id)) && bytes.Equal(t.idAt(s), id) {
			t.slots[i] = slotOf(h, len(id), idOff)
			return
		}
	}
}

func (t *catalogTable) grow() {
	old := t.slots
	t.slots = getSlots(2 * len(old))
	defer putSlots(old)
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		h := maphash.Bytes(t.seed, t.idAt(s))
		i := h & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// each calls fn with the last line of each session, in the file's order:
// the lines are read in sequence, not in the table's (hash) order, which
// would jump across the whole file for every session.
func (t *catalogTable) each(fn func(e entry)) {
	data := t.data[:t.size]
	// In batches, their slots loaded together first (prefetch): the lines
	// are read in order, but the table is not.
	const batch = 64
	var (
		hs     [batch]uint64
		starts [batch]int
		ats    [batch]int
		slots  [batch]uint64
		n      int
	)
	flush := func() {
		t.prefetch(hs[:n], slots[:])
		for j := range n {
			start, at := starts[j], ats[j]
			end := bytes.IndexByte(data[start:], '\n')
			line := data[start : start+end]
			l := bytes.IndexByte(line[at:], '\t')
			// Only a checked line is in the table: a garbled one is skipped.
			if i := t.findHashed(hs[j], line[at:at+l]); i < 0 || int(t.slots[i]&offMask)-1 != start+at {
				continue
			}
			if e, ok := parseFields(line, t.agents); ok {
				e.off = int64(start)
				fn(e)
			}
		}
		n = 0
	}
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		line := data[off : off+end]
		start := off
		off += end + 1
		if len(line) < 11 || line[9] == kindCensus {
			continue
		}
		at, l := lineIDAt(line)
		if l == 0 {
			continue
		}
		hs[n], starts[n], ats[n] = t.hash(line[at:at+l]), start, at
		if n++; n == batch {
			flush()
		}
	}
	flush()
}

// find returns the slot of id, or -1.
func (t *catalogTable) find(id []byte) int {
	return t.findHashed(maphash.Bytes(t.seed, id), id)
}

func (t *catalogTable) hash(id []byte) uint64 { return maphash.Bytes(t.seed, id) }

// prefetch loads the slots of hashes hs, then the catalog bytes around
// the ids they point to, so that the lookups after it find them cached.
// Each load here is independent of the one before, so the processor
// overlaps their misses; lookups one after another wait out each miss
// (two per name, in a 2 MB table and a 10 MB file) in turn.
func (t *catalogTable) prefetch(hs []uint64, slots []uint64) {
	mask := uint64(len(t.slots) - 1)
	for j, h := range hs {
		slots[j] = t.slots[h&mask]
	}
	var sink byte
	for _, s := range slots[:len(hs)] {
		if s != 0 {
			off := int(s&offMask) - 1
			sink += t.data[max(off-32, 0)] + t.data[off] + t.data[min(off+32, len(t.data)-1)]
		}
	}
	t.sink += sink
}

// findHashed is find of id, whose hash is h.
func (t *catalogTable) findHashed(h uint64, id []byte) int {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		if sameTag(s, h, len(id)) && bytes.Equal(t.idAt(s), id) {
			return int(i)
		}
	}
}

// idAt is the id a slot points to.
func (t *catalogTable) idAt(s uint64) []byte {
	off := int(s&offMask) - 1
	if n := int(s >> 32 & 0xff); n < idLenUnknown {
		return t.data[off : off+n]
	}
	end := bytes.IndexByte(t.data[off:], '\t')
	return t.data[off : off+end]
}

// lineStart is where the line of a slot starts.
func (t *catalogTable) lineStart(s uint64) int {
	return bytes.LastIndexByte(t.data[:int(s&offMask)-1], '\n') + 1
}

// lineAt is the line a slot points to, without its newline.
func (t *catalogTable) lineAt(s uint64) []byte {
	off := t.lineStart(s)
	end := bytes.IndexByte(t.data[off:], '\n')
	return t.data[off : off+end]
}

// entryAt parses the line of a slot, which scan checked.
func (t *catalogTable) entryAt(s uint64) entry {
	line := t.lineAt(s)
	e, _ := parseFields(line, t.agents)
	e.off = int64(t.lineStart(s))
	return e
}

// headAt reads what a listing's filter needs of the line of slot s — its
// kind, update time, id and agent — from the bytes around the id, which
// find has just brought into the cache, without scanning the rest of the
// line. ok is false for a line whose columns do not parse.
func (t *catalogTable) headAt(s uint64) (kind byte, updated int64, id, agent string, ok bool) {
	idb := t.idAt(s)
	idOff := int(s&offMask) - 1
	start := t.lineStart(s)
	if idOff-start < 13 || len(idb) == 0 {
		return 0, 0, "", "", false
	}
	if updated, ok = parseInt(t.data[start+11 : idOff-1]); !ok {
		return 0, 0, "", "", false
	}
	rest := t.data[idOff+len(idb)+1:]
	end := bytes.IndexByte(rest, '\t')
	if end < 0 {
		return 0, 0, "", "", false
	}
	agent, known := t.agents[string(rest[:end])]
	if !known {
		agent = string(rest[:end])
		t.agents[agent] = agent
	}
	return t.data[start+9], updated, unsafe.String(&idb[0], len(idb)), agent, true
}

// checkLine checks a line's CRC; it returns the CRC.
func checkLine(line []byte) (uint32, bool) {
	if len(line) < 11 || line[8] != '\t' {
		return 0, false
	}
	want, ok := parseHex32(line[:8])
	crc := crc32.ChecksumIEEE(line[9:])
	return crc, ok && want == crc
}

// lineIDAt is where the id column of a checked line starts, and its
// length; 0 when the line has none.
func lineIDAt(line []byte) (at, n int) {
	i := bytes.IndexByte(line[11:], '\t') // after the CRC and kind: the time
	if i < 0 {
		return 0, 0
	}
	at = 11 + i + 1
	if n = bytes.IndexByte(line[at:], '\t'); n < 0 {
		return 0, 0
	}
	return at, n
}

// lineID is the id column of a checked line.
func lineID(line []byte) []byte {
	at, n := lineIDAt(line)
	return line[at : at+n]
}
