package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"

	"github.com/dsh-go/dsh/errs"
)

// decided carries a request's checked addresses to the transport's dial.
type decided struct {
	host  string
	addrs []netip.Addr
	port  uint16
}

type decidedKey struct{}

// forward passes an absolute-form request (GET http://host/path) on to
// its host once the policy allows it.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		p.badRequest(w, "dsh egress proxy: only http:// URLs are forwarded; for "+r.URL.Scheme+":// the client must tunnel with CONNECT (set HTTPS_PROXY)")
		return
	}
	host, addrs, port, err := p.decide(r.Context(), r.URL.Host, "80")
	if err != nil {
		p.refuse(w, r, r.URL.Host, err)
		return
	}
	ctx := context.WithValue(r.Context(), decidedKey{}, decided{host: host, addrs: addrs, port: port})
	p.fwd.ServeHTTP(w, r.WithContext(ctx))
}

func (p *Proxy) newForwarder() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The upstream must see the host that was checked, not a Host
			// header naming another site behind the same address (domain
			// fronting). net/http already takes an absolute-form request's
			// host from its URL; an empty Out.Host keeps it so here too.
			pr.Out.Host = ""
		},
		Transport: p.tr,
		// Broken client or upstream connections mid-body are routine for
		// a proxy; they go to the debug log, not to stderr.
		ErrorLog: slog.NewLogLogger(p.opts.Logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errs.HasCode(err, Unreachable) && !errs.HasCode(err, Refused) {
				if errors.Is(err, context.Canceled) {
					// The client left or the proxy is closing. Returning
					// would let net/http send an empty 200; abort instead
					// so the client sees the connection cut.
					panic(http.ErrAbortHandler)
				}
				err = errs.Wrap(Unreachable, err, "dsh egress proxy: the request to "+r.URL.Host+" failed").WithReason("egress/upstream")
			}
			p.fail(w, r, r.URL.Host, err)
		},
	}
}

func (p *Proxy) newTransport() *http.Transport {
	return &http.Transport{
		// Never chain to the proxy of dsh's own environment.
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d, ok := ctx.Value(decidedKey{}).(decided)
			if !ok {
				// Only forward sets it; a dial without a decision is a bug
				// and must not reach the network.
				return nil, errs.New(errs.Internal, "dsh egress proxy: dial without a policy decision").WithReason("egress/undecided")
			}
			return p.dial(ctx, d.host, d.addrs, d.port)
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     p.opts.IdleTimeout,
		DisableCompression:  true,
		// No ResponseHeaderTimeout: a long poll may wait for minutes, and
		// the command's own timeout bounds it.
		MaxResponseHeaderBytes: int64(p.opts.MaxHeaderBytes) * 4,
	}
}
