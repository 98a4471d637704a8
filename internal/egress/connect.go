package egress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// connect tunnels CONNECT host:port: decide, dial, answer 200, then copy
// bytes both ways until both sides are done, the tunnel idles out or the
// proxy closes.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	// Not r.Context(): net/http cancels it when the client half-closes,
	// which a tunnel client may do right after sending its data; the dial
	// is bounded by DialTimeout and stopped by Close all the same.
	ctx := p.ctx
	host, addrs, port, err := p.decide(ctx, r.RequestURI, "")
	if err != nil {
		p.refuse(w, r, r.RequestURI, err)
		return
	}
	up, err := p.dial(ctx, host, addrs, port)
	if err != nil {
		p.fail(w, r, r.RequestURI, err)
		return
	}
	defer up.Close()
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "dsh egress proxy: cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	defer client.Close()
	client.SetDeadline(time.Time{})
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// A client may send its first bytes (a TLS hello) right behind the
	// CONNECT line; net/http has them buffered already.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	t := &tunnel{idle: p.opts.TunnelIdleTimeout}
	t.touch()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.copy(up, client)
	}()
	t.copy(client, up)
	<-done
}

// tunnel copies both ways and ends when no byte moved in either direction
// for idle. Reads and writes carry deadlines; a read deadline that passes
// while the other direction was busy is simply renewed.
type tunnel struct {
	idle time.Duration
	last atomic.Int64 // unix nanoseconds of the last byte moved
}

func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

func (t *tunnel) idleFor() time.Duration {
	return time.Since(time.Unix(0, t.last.Load()))
}

// copy moves bytes from src to dst. At src's end of stream it half-closes
// dst so the far side sees it and the other direction can finish; on any
// other failure it closes both, which ends the other direction too.
func (t *tunnel) copy(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	// Deadlines are renewed only once a quarter of the idle time has
	// passed since they were set, not on every read: that is precise
	// enough for a timeout of minutes and keeps two timer updates per
	// read off the copy loop.
	var renewed time.Time
	for {
		if now := time.Now(); now.Sub(renewed) > t.idle/4 {
			renewed = now
			src.SetReadDeadline(now.Add(t.idle))
			dst.SetWriteDeadline(now.Add(t.idle))
		}
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				dst.Close()
				return
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && t.idleFor() < t.idle {
			renewed = time.Time{}
			continue
		}
		if errors.Is(err, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return
			}
		}
		src.Close()
		dst.Close()
		return
	}
}
