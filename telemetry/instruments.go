package telemetry

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// dsh keeps its own instruments rather than the OpenTelemetry SDK's
// synchronous ones. Metrics are not sampled, so they are paid for on every
// turn and every input whatever the trace sampling; an SDK Add resolves
// and normalises its attribute set and walks each reader's aggregator on
// every call (a quarter of a microsecond with no reader at all), which
// made a turn with sampling 0 half again as costly as one without
// telemetry. Here a measurement is a map lookup by the attribute values
// and an atomic add (a short lock for a histogram), and the SDK reads the
// cells only when a reader collects: package provider hands them to every
// reader as a metric producer (Metrics.Read).

// maxAttrs is the most attributes an instrument of dsh's has (dsh.tokens:
// agent, model, principal, tenant and type).
const maxAttrs = 6

type attrValues [maxAttrs]string

// family is an instrument's cells by attribute values: the attribute keys
// are the instrument's, fixed when it is made, so a measurement passes
// only the values and looks its cell up without building a set.
type family[C any] struct {
	name, desc, unit string
	keys             []attribute.Key
	mu               sync.RWMutex
	cells            map[attrValues]*cell[C]
	init             func(*C)
	// last is the cell measured last: an agent's steps, or the inputs
	// of one entry point, measure the same cell over and over, and
	// comparing a few strings is cheaper than hashing the map's key.
	last atomic.Pointer[cell[C]]
}

type cell[C any] struct {
	vals  attrValues
	attrs attribute.Set
	v     C
}

func (f *family[C]) cell(vals []string) *C {
	if c := f.last.Load(); c != nil && c.is(vals, len(f.keys)) {
		return &c.v
	}
	var k attrValues
	copy(k[:], vals)
	f.mu.RLock()
	c := f.cells[k]
	f.mu.RUnlock()
	if c != nil {
		f.last.Store(c)
		return &c.v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c = f.cells[k]; c != nil {
		return &c.v
	}
	kvs := make([]attribute.KeyValue, len(f.keys))
	for i, key := range f.keys {
		kvs[i] = key.String(k[i])
	}
	c = &cell[C]{vals: k, attrs: attribute.NewSet(kvs...)}
	if f.init != nil {
		f.init(&c.v)
	}
	if f.cells == nil {
		f.cells = map[attrValues]*cell[C]{}
	}
	f.cells[k] = c
	f.last.Store(c)
	return &c.v
}

// is reports whether the cell's values are vals: the first n, as many
// as the instrument has keys; values past them are ignored, missing ones
// are empty, as the map's key makes them.
func (c *cell[C]) is(vals []string, n int) bool {
	for i := range n {
		v := ""
		if i < len(vals) {
			v = vals[i]
		}
		if c.vals[i] != v {
			return false
		}
	}
	return true
}

// each calls fn with every cell, in no particular order.
func (f *family[C]) each(fn func(attribute.Set, *C)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, c := range f.cells {
		fn(c.attrs, &c.v)
	}
}

func newFamily[C any](name, desc, unit string, keys ...string) family[C] {
	ks := make([]attribute.Key, len(keys))
	for i, k := range keys {
		ks[i] = attribute.Key(k)
	}
	return family[C]{name: name, desc: desc, unit: unit, keys: ks}
}

// Counter is a monotonic int64 sum by attribute values.
type Counter struct{ f family[atomicInt] }

// Add adds n to the cell of vals: the values of the instrument's
// attribute keys, in their order. A nil Counter does nothing.
func (c *Counter) Add(n int64, vals ...string) {
	if c == nil {
		return
	}
	c.f.cell(vals).Add(n)
}

// UpDownCounter is an int64 sum that goes down as well as up.
type UpDownCounter struct{ f family[atomicInt] }

// Add adds n (which may be negative) to the cell of vals.
func (c *UpDownCounter) Add(n int64, vals ...string) {
	if c == nil {
		return
	}
	c.f.cell(vals).Add(n)
}

// FloatCounter is a monotonic float64 sum, such as a cost.
type FloatCounter struct{ f family[atomicFloat] }

// Add adds v to the cell of vals; a negative or NaN v is dropped, as the
// SDK drops it from a counter.
func (c *FloatCounter) Add(v float64, vals ...string) {
	if c == nil || !(v >= 0) || math.IsInf(v, 0) {
		return
	}
	c.f.cell(vals).add(v)
}

// atomicInt is atomic.Int64 under a name of the package's own.
type atomicInt = atomic.Int64

type atomicFloat struct{ bits atomic.Uint64 }

func (a *atomicFloat) add(v float64) {
	for {
		old := a.bits.Load()
		if a.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (a *atomicFloat) load() float64 { return math.Float64frombits(a.bits.Load()) }

// Histogram is an explicit-bucket histogram of seconds.
type Histogram struct{ f family[histCell] }

// secondsBounds are the bucket bounds of every dsh histogram: from a
// millisecond (a store flush, an admission) to five minutes (a model
// request, an approval a person answers).
var secondsBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

type histCell struct {
	mu       sync.Mutex
	buckets  [len(secondsBounds) + 1]uint64
	count    uint64
	sum      float64
	min, max float64
}

// Record adds v to the cell of vals.
func (h *Histogram) Record(v float64, vals ...string) {
	if h == nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	i := bucket(v)
	c := h.f.cell(vals)
	c.mu.Lock()
	c.buckets[i]++
	if c.count == 0 || v < c.min {
		c.min = v
	}
	if c.count == 0 || v > c.max {
		c.max = v
	}
	c.count++
	c.sum += v
	c.mu.Unlock()
}

// bucket is the index of v's bucket: the first bound at or above v.
// Most measurements are shorter than the first bound (an admission, a
// flush), so the scan starts there: one comparison for them, where a
// binary search makes five.
func bucket(v float64) int {
	for i, b := range secondsBounds {
		if v <= b {
			return i
		}
	}
	return len(secondsBounds)
}

// Since records the seconds since start.
func (h *Histogram) Since(start time.Time, vals ...string) {
	if h == nil {
		return
	}
	h.Record(time.Since(start).Seconds(), vals...)
}

// SinceMono records the seconds since start, a reading of Now.
func (h *Histogram) SinceMono(start Mono, vals ...string) {
	if h == nil {
		return
	}
	h.Record(time.Duration(Now()-start).Seconds(), vals...)
}

// Mono is a reading of the monotonic clock, for a duration only a
// histogram needs. time.Now reads the wall clock as well; a duration
// between two Mono readings reads the monotonic clock alone, one clock
// read fewer on paths that measure every call, sampled or not (~100 ns
// each on a busy virtual machine).
type Mono time.Duration

// monoEpoch is the origin of Mono readings.
var monoEpoch = time.Now()

// Now reads the monotonic clock.
func Now() Mono { return Mono(time.Since(monoEpoch)) }

// Kind is what sort of instrument a Reading is of.
type Kind int

const (
	KindCounter Kind = iota
	KindUpDownCounter
	KindFloatCounter
	KindHistogram
)

// Reading is an instrument's cells as ReadMetrics found them: cumulative
// since Start.
type Reading struct {
	Name, Description, Unit string
	Kind                    Kind
	Start                   time.Time
	Points                  []Point
}

// Point is one cell of a Reading. Int is a counter's or up-down
// counter's value, Float a float counter's; the rest are a histogram's,
// whose Buckets has one more entry than Bounds. Bounds is shared by every
// point: read it, do not change it.
type Point struct {
	Attrs    attribute.Set
	Int      int64
	Float    float64
	Count    uint64
	Sum      float64
	Min, Max float64
	Bounds   []float64
	Buckets  []uint64
}

// ReadMetrics reads every instrument of the installed telemetry (Read of
// M); nil when telemetry is off.
func ReadMetrics() []Reading { return M().Read() }

func readInt(k Kind, start time.Time, f *family[atomicInt]) Reading {
	r := Reading{Name: f.name, Description: f.desc, Unit: f.unit, Kind: k, Start: start}
	f.each(func(s attribute.Set, c *atomicInt) { r.Points = append(r.Points, Point{Attrs: s, Int: c.Load()}) })
	return r
}

func readFloat(start time.Time, f *family[atomicFloat]) Reading {
	r := Reading{Name: f.name, Description: f.desc, Unit: f.unit, Kind: KindFloatCounter, Start: start}
	f.each(func(s attribute.Set, c *atomicFloat) { r.Points = append(r.Points, Point{Attrs: s, Float: c.load()}) })
	return r
}

func readHist(start time.Time, f *family[histCell]) Reading {
	r := Reading{Name: f.name, Description: f.desc, Unit: f.unit, Kind: KindHistogram, Start: start}
	f.each(func(s attribute.Set, c *histCell) {
		c.mu.Lock()
		p := Point{Attrs: s, Count: c.count, Sum: c.sum, Min: c.min, Max: c.max, Bounds: secondsBounds[:],
			Buckets: append([]uint64(nil), c.buckets[:]...)}
		c.mu.Unlock()
		r.Points = append(r.Points, p)
	})
	return r
}
