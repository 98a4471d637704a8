package execplugin

import (
	"bytes"
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// maxOutputLine bounds one logged line of a plugin's output: a plugin that
// writes without newlines is logged in pieces of this size rather than
// held in memory.
const maxOutputLine = 4096

// outputLog writes what a plugin prints to dsh's log, one entry per line,
// under the plugin's logger (named after its entry) with the stream it came
// from. print debugging is how many authors start; thrown away, it looked
// like the plugin never ran.
type outputLog struct {
	log    hclog.Logger
	stream string

	mu      sync.Mutex
	pending []byte
	// skipFirst drops the first line: on a plugin's raw stdout that is
	// the handshake, which go-plugin reads and which is not output.
	skipFirst bool
}

func newOutputLog(log hclog.Logger, stream string) *outputLog {
	return &outputLog{log: log, stream: stream}
}

func (o *outputLog) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, p...)
	for {
		i := bytes.IndexByte(o.pending, '\n')
		if i < 0 {
			if len(o.pending) >= maxOutputLine {
				o.emit(o.pending[:maxOutputLine])
				o.pending = append(o.pending[:0], o.pending[maxOutputLine:]...)
				continue
			}
			return len(p), nil
		}
		o.emit(o.pending[:i])
		o.pending = append(o.pending[:0], o.pending[i+1:]...)
	}
}

// flush logs a last line the plugin did not end with a newline.
func (o *outputLog) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		o.emit(o.pending)
		o.pending = o.pending[:0]
	}
}

func (o *outputLog) emit(line []byte) {
	if o.skipFirst {
		o.skipFirst = false
		return
	}
	o.log.Info("plugin output", "stream", o.stream, "line", string(bytes.TrimRight(line, "\r")))
}

// teeOutput passes r through to its reader (go-plugin, which reads the
// handshake and discards the rest) and copies every byte to w.
// At the end of the stream it logs a last line left without a newline.
type teeOutput struct {
	r io.ReadCloser
	w *outputLog
}

func (t teeOutput) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		_, _ = t.w.Write(p[:n])
	}
	if err != nil {
		t.w.flush()
	}
	return n, err
}

func (t teeOutput) Close() error { return t.r.Close() }
